# Only the reads written: the padding past the map keeps whatever the buffer held,
# where a fresh run has zeros.
/    memset(buf, 0, nbuf \* sizeof \*buf);                 \/\* the padding is 0 \*\//d
