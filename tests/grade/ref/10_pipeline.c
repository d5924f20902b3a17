/* Exercise 10, dtlab's own answer: lib/schedule.c. */
#include "exercises.h"

int ex_pp_order(int schedule, int P, int M, int s, dt_pp_op *ops)
{
    return dt_pp_order(schedule, P, M, s, ops);
}

int ex_pp_timetable(int schedule, int P, int M, int tb, int *start)
{
    return dt_pp_timetable(schedule, P, M, tb, start);
}
