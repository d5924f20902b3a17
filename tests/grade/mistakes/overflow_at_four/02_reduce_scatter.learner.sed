# The scratch for an incoming chunk is one float short at 4 ranks only (a "special
# case" gone wrong): the receive writes past its end there, and nowhere else. ASan
# watches every rank count, so it is found.
s|malloc((hi0 - lo0 + 1) \* sizeof \*in)|malloc((hi0 - lo0 + 1 - 2 * (n == 4 \&\& hi0 > lo0)) * sizeof *in)|
