/* Argument checks that several collectives share: their messages name the function the
 * user called, in MPI's terms. */
#include <limits.h>
#include "collectives.h"
#include "buf.h"

size_t dti_check_blocks(const char *fn, const void *sendbuf, int sendcount,
                        MPI_Datatype sendtype, const void *recvbuf, int recvcount,
                        MPI_Datatype recvtype, int n)
{
    int in_place = sendbuf == MPI_IN_PLACE;
    DT_REQUIRE(recvbuf != MPI_IN_PLACE, "%s: MPI_IN_PLACE goes in sendbuf, not recvbuf", fn);
    DT_REQUIRE(recvcount >= 0, "%s: recvcount is %d; it must be 0 or more", fn, recvcount);
    DT_REQUIRE(recvcount <= INT_MAX / n, "%s: %d ranks times recvcount %d elements is "
               "more than an int can count", fn, n, recvcount);
    DT_REQUIRE(in_place || sendtype == recvtype, "%s: sendtype and recvtype differ; dtlab "
               "needs them to be the same", fn);
    DT_REQUIRE(in_place || sendcount == recvcount, "%s: sendcount %d and recvcount %d "
               "differ; they must be equal", fn, sendcount, recvcount);
    DT_REQUIRE(in_place || sendbuf != NULL || recvcount == 0,
               "%s: sendbuf is NULL but sendcount is %d", fn, sendcount);
    DT_REQUIRE(recvbuf != NULL || recvcount == 0,
               "%s: recvbuf is NULL but recvcount is %d", fn, recvcount);
    return (size_t)recvcount * dt_type_size(recvtype);
}
