# Block j's displacement is the sum up to and including count j: each block placed
# where it should end, one block off.
s|        displs\[j\] = total;|        displs[j] = total + counts[j];|
