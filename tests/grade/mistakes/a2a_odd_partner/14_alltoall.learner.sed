# The round robin with every rank that is its own partner sent to rank N-1, for odd N
# too: only even N keeps rank N-1 off the circle; for odd N, N-1 is on it and already
# paired, so two ranks wait on it at once (and the all-to-all deadlocks from 3 ranks).
s|if (p == r \&\& m < N)                    /\* the one that would sit out \*/|if (p == r)                             /* the one that would sit out */|
