/* Training timetables (timetable.h). (Being written.) */
#include <stdio.h>
#include <string.h>

#include "timetable.h"

const char *const dv_train_algos[] = { "gpipe", "1f1b", NULL };

int dv_tt_is_training(const dt_trace *t) { (void)t; return 0; }

int dv_tt_build(dv_tt *tt, const dv_model *m, char *err, size_t errlen)
{
    (void)m;
    memset(tt, 0, sizeof *tt);
    snprintf(err, errlen, "the timetable is not written yet");
    return -1;
}

void dv_tt_free(dv_tt *tt) { (void)tt; }
int dv_tt_step_at(const dv_tt *tt, double t) { (void)tt; (void)t; return -1; }
int dv_tt_stash(const dv_tt *tt, int rank, double t) { (void)tt; (void)rank; (void)t; return 0; }
int dv_tt_block_at(const dv_tt *tt, int rank, int lane, double t)
{
    (void)tt; (void)rank; (void)lane; (void)t;
    return -1;
}
void dv_tt_describe_step(const dv_tt *tt, int s, char *buf, size_t len)
{
    (void)tt; (void)s;
    snprintf(buf, len, "%s", "");
}
int dv_train_algo_index(const char *name) { (void)name; return -1; }
int dv_train_algo_trace(int algo, int stages, int micro, dt_trace *t, char *err, size_t errlen)
{
    (void)algo; (void)stages; (void)micro;
    memset(t, 0, sizeof *t);
    snprintf(err, errlen, "not written yet");
    return -1;
}
