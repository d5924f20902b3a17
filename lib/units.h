/* Byte counts in words, for people: no MPI, so the viewer uses it too. */
#ifndef DT_UNITS_H
#define DT_UNITS_H

#include <stddef.h>

/* Formats nbytes as "12 B", "1.5 KiB", "64 MiB"... into buf (at least 16 bytes);
 * returns buf. */
char *dt_format_bytes(double nbytes, char *buf, size_t len);

#endif /* DT_UNITS_H */
