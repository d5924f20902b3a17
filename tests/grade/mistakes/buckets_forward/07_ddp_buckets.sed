# The buckets are filled from layer 0 forwards, so bucket 0 holds the FIRST layers,
# which backward finishes last.
/return dt_ddp_buckets(off, nl, esize, cap_bytes, bucket_of);/c\
    int nb = 0;\
    size_t fill = 0;\
    for (int i = 0; i < nl; i++) {\
        size_t nbytes = (off[i + 1] - off[i]) * esize;\
        if (fill > 0 && fill + nbytes > cap_bytes) {\
            nb++;\
            fill = 0;\
        }\
        fill += nbytes;\
        bucket_of[i] = nb;\
    }\
    return nb + 1;
