# ZB-H1 with every W right after its own B, put off by nothing: 1F1B with the backward
# split in two. The W's no longer fill the tail, stages s > 0 stash less than min(P, M)
# and the step takes more slots.
s|int k = 0, d = s;   |int k = 0, d = 0;   |
