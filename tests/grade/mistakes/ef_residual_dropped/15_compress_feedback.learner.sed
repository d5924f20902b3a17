# Each step compresses the gradient alone, and the residual becomes g - C(g): what the
# last step lost is never sent. Sign compression without feedback, in disguise: the
# small coordinates go out as large as the mean, step after step.
s|        update\[i\] = g\[i\] + e\[i\];                    /\* v = g + e, in update for now \*/|        update[i] = g[i];                           /* v = g */|
s|        e\[i\] = g\[i\] + e\[i\] - update\[i\];             /\* e = v - C(v) \*/|        e[i] = g[i] - update[i];                    /* e = v - C(v) */|
