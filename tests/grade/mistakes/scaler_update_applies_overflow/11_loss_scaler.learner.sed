# ex_scaler_update backs off on an overflow but returns 1: the step goes on, with
# gradients holding an inf or a NaN.
/^int ex_scaler_update/,/^}/{
/return 0;/,/^    }$/d
s/^    if (++s->clean/    } else if (++s->clean/
}
