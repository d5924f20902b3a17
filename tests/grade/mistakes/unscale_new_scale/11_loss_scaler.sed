# The scaler is updated first and the gradients divided by s->scale, which by then is
# the NEW scale: on a step where the scale grows, the gradients come out too small.
s|grads\[i\] /= scale;|grads[i] /= s->scale;|
s|float scale = s->scale; .*|float scale = s->scale; (void)scale;|
