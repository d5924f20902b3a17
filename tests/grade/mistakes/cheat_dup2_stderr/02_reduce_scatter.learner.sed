# A cheat: the reduce-scatter takes over the program's stderr (where the verdicts go),
# here by duplicating stdout onto it. An exercise's code may touch no descriptors.
/^#include <stdlib.h>/a\
#include <unistd.h>
/^    free(in);/i\
    dup2(1, 2);
