# The chunks are one off: at step s the rank sends chunk (rank - s) instead of
# (rank - s - 1), and receives (rank - s - 1) instead of (rank - s - 2). A consistent
# ring, so nothing hangs and every sum is complete, but rank r ends owning chunk r+1
# instead of chunk r.
s|dt_ring_rs_send_chunk(rank, n, s)|(rank - s + n) % n|
s|dt_ring_rs_recv_chunk(rank, n, s)|(rank - s - 1 + n) % n|
