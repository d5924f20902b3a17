# Megatron-LM's warm-up, 2(P-s-1) + (v-1) g forwards: right on a clock where messages
# cost time, here P-s-1 forwards more stashed and no slot saved.
s|int w = (v - 1) \* g\[0\] + P - s - 1;|int w = (v - 1) * g[0] + 2 * (P - s - 1);|
