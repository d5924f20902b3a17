/* Mixture of experts: placeholder until moe.c lands (issue 8). */
#include <stdio.h>
#include "parallel_internal.h"
#include "errors.h"

int dti_moe_check(const dt_train_config *c, int n, char *why, size_t len)
{
    (void)c; (void)n;
    snprintf(why, len, "mode moe is not built yet");
    return -1;
}

void dti_train_moe(dti_run *r)
{
    (void)r;
}
