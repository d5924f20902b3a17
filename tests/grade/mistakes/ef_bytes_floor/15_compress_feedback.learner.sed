# The bits counted as n / 8 bytes: the last byte, short of 8 elements, travels too.
s|    return (n + 7) / 8 + sizeof \*scale;|    return n / 8 + sizeof *scale;|
