# The diagonal block one off: query i sees keys 0..i-1, its own position left out, so
# the first position of the sequence sees no key at all.
s|int seen = kind == EX_ATTN_FULL ? n : i + 1; .*|int seen = kind == EX_ATTN_FULL ? n : i;|
