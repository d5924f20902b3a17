# A tie won by the higher index (>= where > was due): the top-k of both k go wrong
# wherever two experts are equally likely.
s|(best < 0 \|\| x_t\[e\] > x_t\[best\])|(best < 0 \|\| x_t[e] >= x_t[best])|
