# The partial sums e^(s_j), the largest score not subtracted: the softmax is the same
# in exact arithmetic, but the contract's l is relative to m, and e^(s_j) overflows a
# float past s_j = 88.7.
s|float p = expf(s\[j\] - mx); .*|float p = expf(s[j]);|
