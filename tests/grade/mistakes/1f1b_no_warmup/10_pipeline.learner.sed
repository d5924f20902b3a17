# 1F1B without its warm-up: every stage alternates one forward and one backward from the
# start (F0 B0 F1 B1 ...), so a stage waits for each gradient before it sends the next
# micro-batch on: the pipeline never fills. The timetable is right; it plays whatever
# order ex_pp_order gives.
s|int w = P - s - 1 < M ? P - s - 1 : M;|int w = 0; (void)P; (void)s;        /* no warm-up */|
