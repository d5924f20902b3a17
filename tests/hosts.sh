# ==== 15. many hosts in network namespaces ====
# Sourced by tests/run.sh, which calls hosts_tests; it uses run.sh's helpers (run,
# report, skip, status_words, now, since, missing) and variables ($tmp, $log, $BUILD,
# $MPIEXEC).
#
# scripts/hosts.sh makes hosts out of network namespaces. Bad arguments are refused
# with status 2 on any machine. Where namespaces cannot be made (not root, no `ip`, a
# kernel or container that refuses), the rest is skipped with the reason. Otherwise,
# on 3 hosts (names with a prefix of their own, so a user's hosts are never touched):
# lesson 01 puts each rank on its own host; lessons 22 and 08 run across them; with a
# rate limit, the bandwidth lesson 22 measures stays under it (bytes over time cannot
# beat the link); with netem, its alpha is at least the added delay (where the kernel
# has no netem, the delay is skipped with the reason); `up` over hosts that are up is
# refused and leaves them alone; and after a normal end, a program that fails, a run
# past mpiexec's time limit and a run stopped by a signal, no namespace is left and
# the machine's own links are as before. About 60 s.

hosts_tests() {
    local pfx=dtlabt$$ l22=$BUILD/lessons/22_hosts l01=$BUILD/lessons/01_hello
    local hs=(env DT_HOSTS_PREFIX="$pfx" MPIEXEC="$MPIEXEC" MPIEXEC_TIMEOUT=60
              bash scripts/hosts.sh)
    local bad rc k

    # ---- bad arguments: a usage message and exit 2, before anything is made ----
    while IFS='|' read -r name bad; do
        eval "set -- $bad"
        run "hosts.sh refuses $name" 2 "${hs[@]}" "$@"
    done <<'EOF'
no command|
an unknown command|frobnicate
up without N|up
1 host|up 1
17 hosts|up 17
--rate 0|up 3 --rate 0
--rate 10x|up 3 --rate 10x
--delay -1|up 3 --delay -1
an unknown option|up 3 --bogus
-n for up|up 3 -n 2
no program after --|3 --rate 100
run -x|run -x prog
down with an argument|down now
EOF
    run "hosts.sh refuses a bad DT_HOSTS_PREFIX" 2 env DT_HOSTS_PREFIX='Bad/x' \
        bash scripts/hosts.sh status
    run "hosts.sh --help" 0 bash scripts/hosts.sh --help

    # ---- can this machine make namespaces at all? ----
    "${hs[@]}" check >"$log" 2>&1 </dev/null
    rc=$?
    if [ "$rc" = 3 ]; then
        skip "many hosts (network namespaces)" \
            "$(sed -n 's/^hosts.sh: //p' "$log" | head -n 1)"
        return
    elif [ "$rc" != 0 ]; then
        report "hosts.sh check" 0 "$(status_words "$rc"), want 0 or 3"
        return
    fi
    local netem=1
    grep -q 'netem (--delay): yes' "$log" || netem=0
    for k in "$l01" "$l22" "$BUILD/lessons/08_ring_allreduce"; do
        [ -x "$k" ] || { missing "$(basename "$k") (for many hosts)" "$k"; return; }
    done
    local links0
    links0=$(ip -o link show | awk -F': ' '{ print $2 }' | sort | tr '\n' ' ')

    # ours: how many namespaces of the test's prefix exist
    ours() { ip netns list | grep -c "^$pfx-"; }
    # none_left WHAT: no namespace of ours, and the root namespace's links as before
    none_left() {
        : >"$log"
        local n links
        n=$(ours)
        links=$(ip -o link show | awk -F': ' '{ print $2 }' | sort | tr '\n' ' ')
        if [ "$n" = 0 ] && [ "$links" = "$links0" ]; then
            report "  $1: nothing left behind" 1 "no namespace, links as before"
        else
            report "  $1: nothing left behind" 0 "$n namespaces left; links '$links'"
            "${hs[@]}" down >/dev/null 2>&1
        fi
    }
    # fit_field NAME: alpha (us) or bandwidth (MB/s) from lesson 22's fit line in $log
    fit_field() { sed -n "s/^fit: .*$1 = \\([0-9.]*\\) .*/\\1/p" "$log" | head -n 1; }

    # ---- 3 hosts, no limit: lessons 01, 22 and 08 across them ----
    run "hosts.sh up 3" 0 "${hs[@]}" up 3
    [ "$(ours)" = 4 ] && report "  4 namespaces: a switch and 3 hosts" 1 "" ||
        report "  4 namespaces: a switch and 3 hosts" 0 "$(ours)"
    run "hosts.sh up 3 again is refused" 2 "${hs[@]}" up 3
    [ "$(ours)" = 4 ] || report "  the hosts already up are left alone" 0 "$(ours) left"
    run "01_hello on 3 hosts" 0 "${hs[@]}" run "$l01"
    local placed=0
    for k in 0 1 2; do        # "rank of local of host": rank k alone on host k
        grep -Eq "^ +$k +3 +0 +1 +$pfx-h$k " "$log" && placed=$((placed + 1))
    done
    [ "$placed" = 3 ] && report "  each rank on its own host" 1 "$pfx-h0 .. $pfx-h2" ||
        report "  each rank on its own host" 0 "$placed of 3 ranks where expected"
    run "22_hosts on 3 hosts" 0 "${hs[@]}" run "$l22" --max-size 256K --iters 3
    if grep -q '^3 ranks on 3 hosts' "$log" && [ -n "$(fit_field alpha)" ] &&
       [ -n "$(fit_field bandwidth)" ]; then
        report "  it fits alpha and beta across the network" 1 \
            "alpha $(fit_field alpha) us, $(fit_field bandwidth) MB/s"
    else
        report "  it fits alpha and beta across the network" 0 \
            "no '3 ranks on 3 hosts' or no fit line"
    fi
    run "08_ring_allreduce on 3 hosts" 0 "${hs[@]}" run "$BUILD/lessons/08_ring_allreduce"
    run "08_ring_allreduce, 5 ranks on 3 hosts" 0 "${hs[@]}" run -n 5 \
        "$BUILD/lessons/08_ring_allreduce"
    run "hosts.sh down" 0 "${hs[@]}" down
    none_left "down"
    run "hosts.sh run with no hosts up" 2 "${hs[@]}" run "$l01"

    # ---- a rate limit (tbf), and a delay where the kernel has netem ----
    local rate=200 delay=5 alpha
    run "22_hosts on 3 hosts, --rate $rate --delay $delay" 0 "${hs[@]}" 3 --rate "$rate" \
        --delay "$delay" -- "$l22" --max-size 512K --iters 3
    alpha=$(fit_field alpha)
    # under_rate NAME MB/s: at most the rate (200 Mbit/s is 25 MB/s), with 10% for the
    # token bucket's burst and rounding
    under_rate() {
        if [ -n "$2" ] && awk -v b="$2" -v r="$rate" 'BEGIN { exit !(b <= r / 8 * 1.1) }'
        then
            report "  $1 is under the rate" 1 "$2 MB/s, rate $rate Mbit/s"
        else
            report "  $1 is under the rate" 0 "'$2' MB/s, rate $rate Mbit/s"
        fi
    }
    under_rate "the fitted bandwidth" "$(fit_field bandwidth)"
    under_rate "the largest message's bandwidth" \
        "$(sed -n 's/^largest message: \([0-9.]*\) MB.*/\1/p' "$log")"
    if [ "$netem" = 1 ]; then
        if [ -n "$alpha" ] &&
           awk -v a="$alpha" -v d="$delay" 'BEGIN { exit !(a >= 900 * d) }'; then
            report "  alpha is at least the netem delay" 1 "$alpha us >= $delay ms"
        else
            report "  alpha is at least the netem delay" 0 "'$alpha' us, delay $delay ms"
        fi
    else
        grep -q 'no netem.*NOT applied' "$log" &&
            report "  without netem, it says the delay is not applied" 1 "" ||
            report "  without netem, it says the delay is not applied" 0 "no such message"
        skip "  alpha is at least the netem delay" "this kernel has no netem (sch_netem)"
    fi
    none_left "a run with a rate limit"

    # ---- runs that end badly still take the hosts down ----
    run "a program that fails (--bogus: exit 2)" 2 "${hs[@]}" 3 -- "$l22" --bogus
    none_left "a failed run"
    local t0
    t0=$(now)
    env DT_HOSTS_PREFIX="$pfx" MPIEXEC="$MPIEXEC" MPIEXEC_TIMEOUT=3 \
        bash scripts/hosts.sh 2 -- sleep 30 >"$log" 2>&1 </dev/null
    rc=$?
    [ "$rc" != 0 ] && grep -q 'TIMED OUT' "$log" &&
        report "a run past MPIEXEC_TIMEOUT" 1 "$(status_words "$rc")  [$(since "$t0")]" ||
        report "a run past MPIEXEC_TIMEOUT" 0 "$(status_words "$rc"), want a time-out"
    none_left "a timed-out run"
    # a signal to the whole job, as Ctrl-C sends one (SIGTERM: a job started in the
    # background ignores SIGINT)
    t0=$(now)
    setsid env DT_HOSTS_PREFIX="$pfx" MPIEXEC="$MPIEXEC" MPIEXEC_TIMEOUT=60 \
        bash scripts/hosts.sh 2 -- sleep 30 >"$log" 2>&1 </dev/null &
    local pid=$!
    for k in $(seq 50); do
        ip netns pids "$pfx-h1" 2>/dev/null | grep -q . && break
        sleep 0.2
    done
    sleep 0.5
    kill -TERM -- "-$pid" 2>/dev/null
    wait "$pid"
    rc=$?
    [ "$rc" != 0 ] && report "a run stopped by a signal" 1 \
        "$(status_words "$rc")  [$(since "$t0")]" ||
        report "a run stopped by a signal" 0 "exit 0"
    none_left "a stopped run"
}
