# Only virtual ranks below 4 pass the data on: right up to 5 ranks, where virtual rank 4
# has no children; at 6 and 7 it has (5 and 6), and they wait for it.
s|if (v + m < n)|if (v + m < n \&\& v < 4)|
