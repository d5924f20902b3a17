# The scale taken from the gradient, the signs from g + e: the message's size is not
# that of what it carries, and e keeps the difference, step after step.
s|    \*scale = ex_sign_compress(update, n, bits);|    *scale = ex_sign_compress(g, n, bits);          /* the gradient's scale */\
    ex_sign_compress(update, n, bits);              /* the signs of g + e */|
