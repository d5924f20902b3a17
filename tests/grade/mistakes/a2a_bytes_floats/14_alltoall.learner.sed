# The count returned is the floats sent, not the bytes: counts are elements, bytes are
# nbytes, and never one for the other.
s|        nbytes += snb;|        nbytes += (size_t)scounts[p];|
