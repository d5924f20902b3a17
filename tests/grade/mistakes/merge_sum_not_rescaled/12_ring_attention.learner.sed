# The merge rescales o but adds the running sums as they are: l and l2 were summed
# relative to different maxima, so the merged l is too large whenever m != m2, and every
# row's attention o / l comes out too small.
s|\*l = \*l \* a + l2 \* b;|*l = *l + l2;|
