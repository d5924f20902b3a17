# Every rank sends to the right, then receives from the left, in two calls. Small chunks
# pass (MPI buffers them: the send returns at once), but once a chunk is past MPI's
# eager limit a send waits for its receive, which every rank only posts after its own
# send: all wait forever. The fix: one dt_sendrecv.
/dt_sendrecv(buf + slo/,/left, TAG, comm);/c\
        dt_send(buf + slo, (shi - slo) * sizeof *buf, right, TAG, comm);\
        dt_recv(buf + rlo, (rhi - rlo) * sizeof *buf, left, TAG, comm);
