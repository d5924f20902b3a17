# The right neighbour taken as the rank itself: each rank sends its chunk to itself,
# and its left neighbour waits for a chunk that never comes. dtlab names the rank that
# sent to itself.
s/int left = dt_ring_left(rank, n), right = dt_ring_right(rank, n);/int left = dt_ring_left(rank, n), right = rank;/
