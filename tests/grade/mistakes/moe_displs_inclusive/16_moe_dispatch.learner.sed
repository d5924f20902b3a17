# Inclusive displacements: each rank's block said to start where it ends.
/^        sdispls\[r\] = at;$/d
s|^        at += counts\[r\];$|        at += counts[r];\
        sdispls[r] = at;|
