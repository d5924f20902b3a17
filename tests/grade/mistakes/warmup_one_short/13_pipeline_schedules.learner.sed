# Interleaved's warm-up one forward short: (v-1) g + P-s-2. With v > 1 the last stage
# reaches the backward of its last chunk before that chunk's forward, which the loss
# needs: the stages' orders deadlock, found by the clock, never run.
s|int w = (v - 1) \* g\[0\] + P - s - 1;|int w = (v - 1) * g[0] + P - s - 2;   /* one short */\n    if (w < 0)\n        w = 0;|
