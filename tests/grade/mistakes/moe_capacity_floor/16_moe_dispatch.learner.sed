# The capacity floored: an even load (factor 1, T a multiple of E) fits, but any other
# drops a token that had room coming.
s|    int C = (int)ceil(v);|    int C = (int)floor(v);|
