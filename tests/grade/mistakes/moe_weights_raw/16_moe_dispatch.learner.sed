# Top-2's weights left as the softmax probabilities: the two no longer add up to 1.
s|            float s = w_t\[0\] + w_t\[1\];|            float s = 1.0f;                        /* not renormalised */|
