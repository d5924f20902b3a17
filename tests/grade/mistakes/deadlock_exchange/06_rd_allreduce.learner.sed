# Each exchange is dt_send to the partner, then dt_recv from it: both partners send
# first. A small message fits MPI's eager buffer, so the send returns and the sums come
# out right; a large one waits for its receive, which neither partner ever posts: a
# deadlock. The fix: dt_sendrecv.
s|dt_sendrecv(buf, nbytes, partner, tmp, nbytes, partner, TAG, comm);|dt_send(buf, nbytes, partner, TAG, comm);\
            dt_recv(tmp, nbytes, partner, TAG, comm);|
