# Each element enters the byte at the top and sinks one bit per element after it: a
# full byte ends right, element 8b at bit 0, but the short last byte of an n that is
# not a multiple of 8 is stored before its elements have sunk to the bottom.
s|            bits\[i / 8\] = (unsigned char)(b >> (7 - i % 8));    /\* its first at bit 0 \*/|            bits[i / 8] = (unsigned char)b;|
