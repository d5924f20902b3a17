# One past a run's end: a segment taken to end at start + len + 1, so the parameter just
# past an old rank's run is read from it, the next element of its region: the first of
# its next run, or its padding.
s|                        if (o->start + o->len < stop)|                        if (o->start + o->len + 1 < stop)|
s|                            stop = o->start + o->len;|                            stop = o->start + o->len + 1;|
