/* Byte counts in words (units.h). */
#include <math.h>
#include <stdio.h>

#include "units.h"

char *dt_format_bytes(double nbytes, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (nbytes >= 1024 && u < 4) {
        nbytes /= 1024;
        u++;
    }
    if (u == 0 || nbytes >= 100 || nbytes == floor(nbytes))
        snprintf(buf, len, "%.0f %s", nbytes, units[u]);
    else
        snprintf(buf, len, "%.1f %s", nbytes, units[u]);
    return buf;
}
