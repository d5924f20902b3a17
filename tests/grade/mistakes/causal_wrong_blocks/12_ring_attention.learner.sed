# The causal mask on the wrong blocks: keys of a LATER chunk are taken whole and those
# of an earlier one skipped, the comparison turned round. The diagonal is still right.
s|return kc < qc ? EX_ATTN_FULL|return kc > qc ? EX_ATTN_FULL|
