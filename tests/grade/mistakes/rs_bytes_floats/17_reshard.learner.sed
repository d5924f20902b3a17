# The floats counted, not their bytes.
s|    return floats \* sizeof(float);|    return floats;|
