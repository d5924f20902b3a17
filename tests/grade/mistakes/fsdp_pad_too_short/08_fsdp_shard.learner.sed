# The padded scratch holds the parameter's n floats, not N*s: the allgather and the
# reduce-scatter write past its end.
s|calloc(\*s \* (size_t)N + 1, sizeof \*p);|calloc(n + 1, sizeof *p);    /* the parameter's n floats */|
s|"out of memory (%zu floats)", \*s \* (size_t)N);|"out of memory (%zu floats)", n);|
