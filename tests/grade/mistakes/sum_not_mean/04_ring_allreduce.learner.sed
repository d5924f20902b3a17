# ex_allreduce_mean forgets the division and returns the sum: right at 1 rank, where the
# two agree; n times too large at n ranks. The fix: between the two phases, divide this
# rank's own chunk by n.
/my chunk only/,/buf\[i\] \/= (float)n;/d
