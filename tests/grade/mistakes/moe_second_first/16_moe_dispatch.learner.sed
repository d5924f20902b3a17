# The second choices placed before the first: a full expert then drops a token's first
# choice to make room for another token's second.
s|    for (int j = 0; j < k; j++)                        /\* first choices, then second \*/|    for (int j = k - 1; j >= 0; j--)                   /* second choices, then first */|
