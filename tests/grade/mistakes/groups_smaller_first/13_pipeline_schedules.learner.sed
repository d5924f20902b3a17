# Interleaved's groups with the smaller ones first (M = 5, P = 2: 2 3, not 3 2). The
# warm-up reads the first group's size, now the smaller, so it stashes less, and on the
# last stage a larger group's first backward comes before its own forward: a deadlock.
s|g\[i\] = M / k + (i < M % k);         /\* the larger groups first \*/|g[i] = M / k + (i >= k - M % k);    /* the smaller groups first */|
