/* dtlab: distributed-training communication, built by hand on MPI point-to-point.
 * The umbrella header: include this one. Build with the flags `make` uses (-Ilib) and
 * link build/libdt.a. */
#ifndef DT_H
#define DT_H

#include "errors.h"
#include "core.h"
#include "buf.h"
#include "half.h"
#include "ops.h"
#include "p2p.h"
#include "schedule.h"
#include "trace.h"
#include "prog.h"
#include "collectives/collectives.h"
#include "nn/nn.h"
#include "parallel/parallel.h"

#endif /* DT_H */
