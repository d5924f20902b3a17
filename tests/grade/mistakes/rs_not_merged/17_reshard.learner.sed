# Every segment a read of its own, even where it continues the one before in the old
# region and in the buffer (a slice of rows read row by row).
s|            if (last && last->rank == from && last->src + last->len == src &&|            if (0 \&\& last \&\& last->rank == from \&\& last->src + last->len == src \&\&|
