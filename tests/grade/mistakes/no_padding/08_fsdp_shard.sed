# The shard size rounds down, n / N, so the last n % N elements are on no rank.
s|return n / (size_t)N + (n % (size_t)N != 0);.*|return n / (size_t)N;|
