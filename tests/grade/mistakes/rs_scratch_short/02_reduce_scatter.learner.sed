# The scratch for an incoming chunk holds count / n floats, but the first count % n
# chunks hold one float more: the receive writes past its end.
/Room for one incoming chunk/,/count 0 allocates too/c\
    /* room for one incoming chunk: count / n floats */
s|malloc((hi0 - lo0 + 1) \* sizeof \*in)|malloc((size_t)count / n * sizeof *in)|
