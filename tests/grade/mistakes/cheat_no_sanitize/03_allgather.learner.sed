# A cheat: AddressSanitizer switched off for the function that writes one float past
# the end of the buffer. The attribute is refused.
/^void ex_ring_allgather/i\
__attribute__((no_sanitize_address))
/^void ex_ring_allgather/,/^}/{
/^}/i\
    buf[count] = 0;         /* one past the end */
}
