# Even ranks send first, odd ranks receive first. Fine at 2 ranks, whose partners
# differ in parity; from 3 ranks two even ranks are partners (0 and 2), both send first,
# and once a block is past MPI's eager limit both wait for a receive that never comes.
/dt_sendrecv(send + sdispls\[p\], snb, p, recv + rdispls\[p\], rnb, p, TAG, comm);/c\
        if (rank % 2 == 0) {\
            dt_send(send + sdispls[p], snb, p, TAG, comm);\
            dt_recv(recv + rdispls[p], rnb, p, TAG, comm);\
        } else {\
            dt_recv(recv + rdispls[p], rnb, p, TAG, comm);\
            dt_send(send + sdispls[p], snb, p, TAG, comm);\
        }
