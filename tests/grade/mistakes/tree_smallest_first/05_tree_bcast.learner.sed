# The children are sent to the smallest m first: the data reaches the far half of the
# tree last, and the broadcast takes more than ceil(log2 n) rounds.
s|for (int m = mask >> 1; m > 0; m >>= 1)|for (int m = 1; m < mask; m <<= 1)|
