# The fold is left out: the rank that sits out the exchanges never hands its data over,
# so the sum misses it (it still gets the result back in the unfold).
/1\. the fold/,/^    }$/d
