# The tree is built on the real ranks, so it always hangs from rank 0. Right when the
# root is 0; for any other root every rank ends with rank 0's data instead of the
# root's. The fix: v = (rank - root + n) % n, and real rank = (v + root) % n.
s|int v = (rank - root + n) % n; .*|int v = rank; (void)root;   /* the mistake: not shifted by root */|
s| + root) % n|)|
