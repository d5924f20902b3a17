# The runs of a span laid end to end, each len after the one before: right when stride
# is len, but a tensor-parallel slice of columns (count rows, stride the row's width)
# becomes one block at its start, parameters it does not hold.
s|            size_t a = s\[j\].start + b \* s\[j\].stride;|            size_t a = s[j].start + b * s[j].len;|
