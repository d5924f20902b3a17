# The backward table through the chunks in the forwards' order, 0 first, as if the
# gradient entered at the first virtual stage: B of chunk 0 waits for chunk 1's B, which
# the stage runs later. The tables are wrong and the orders deadlock.
s|\.chunk = fwd ? j : v - 1 - j };|.chunk = j };|
