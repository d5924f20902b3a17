# Section 11 of tests/run.sh: random collectives against MPICH's, for a bounded time.
#
# Sourced by run.sh, which then calls stress_tests; it uses run.sh's helpers (run,
# report, status_words, now, missing) and its variables ($BUILD, $MPIEXEC, $log).
# $BUILD/tests/stress (tests/stress.c) runs at 1, 2, 3, 5 and 8 ranks (and 4, 6, 7 too
# when STRESS_SECONDS is 30 or more) with p2p's default transport (mailboxes between the
# ranks of a host, p2p.h), and once more at 3 ranks with DT_P2P=staging, the path
# through MPI alone. Each run takes STRESS_SECONDS seconds (default 4; the section then
# takes about 25 s), but three take less: at 1 rank, where a collective sends nothing and
# thousands run in a second, a quarter; at 8 ranks, where 2 cores spend seconds starting
# and ending the job, and the staging run, half. Each run prints its seed; a mismatch
# fails the run and the FAIL line says how to replay it (with the run's DT_P2P).
# `make stress` runs the section longer.
#
#     STRESS_SECONDS=60 SECTIONS=11 bash tests/run.sh

stress_tests() {
    local bin=$BUILD/tests/stress secs=${STRESS_SECONDS:-4} ranks="1 2 3 5 8"
    local n t0 rc took line replay mism seed run p2p name s quarter half envs
    if [ ! -x "$bin" ]; then
        missing stress "$bin"
        return
    fi
    if ! [[ "$secs" =~ ^[1-9][0-9]*$ ]]; then
        : >"$log"
        report "stress: STRESS_SECONDS" 0 "'$secs' is not a whole number of seconds"
        return
    fi
    [ "$secs" -ge 30 ] && ranks="1 2 3 4 5 6 7 8"
    quarter=$(( secs / 4 > 0 ? secs / 4 : 1 ))
    half=$(( secs / 2 > 0 ? secs / 2 : 1 ))

    # each run: N:P2P, P2P a value of DT_P2P or - for the default
    for run in $(printf '%s:-\n' $ranks) 3:staging; do
        n=${run%%:*}
        p2p=${run#*:}
        name="stress -n $n"
        s=$secs
        envs=()
        [ "$n" = 1 ] && s=$quarter
        [ "$n" = 8 ] && s=$half
        if [ "$p2p" != - ]; then
            name="$name (DT_P2P=$p2p)"
            s=$half
            envs=(env DT_P2P="$p2p")
        fi
        # well above the run's own length: only a hang reaches it
        t0=$(now)
        MPIEXEC_TIMEOUT=$((2 * s + 60)) ${envs[@]+"${envs[@]}"} \
            "$MPIEXEC" -n "$n" "$bin" --seconds "$s" >"$log" 2>&1 </dev/null
        rc=$?
        took=$(since "$t0")
        line=$(grep -m1 '^stress: [0-9]* collectives in' "$log")
        replay=$(grep -m1 '^stress: replay: ' "$log" | sed 's/^stress: replay: //')
        [ "$p2p" != - ] && [ -n "$replay" ] && replay="DT_P2P=$p2p $replay"
        mism=$(sed -n 's/.*, \([0-9]*\) mismatch\(es\)\{0,1\}$/\1/p' <<<"$line")
        seed=$(sed -n 's/^stress: seed \([0-9]*\),.*/\1/p' "$log" | head -n 1)
        if grep -q 'APPLICATION TIMED OUT' "$log"; then
            report "$name" 0 "timed out after $((2 * s + 60)) s (a deadlock?)  [$took]"
        elif [ "$rc" = 0 ] && [ "$mism" = 0 ] && [[ "$line" != "stress: 0 "* ]]; then
            report "$name" 1 "${line#stress: } (seed $seed)  [$took]"
        elif [ -n "$replay" ]; then
            report "$name" 0 "$mism mismatches; replay: $replay  [$took]"
        else
            report "$name" 0 "$(status_words "$rc"): ${line:-no summary line}  [$took]"
        fi
    done

    # a bad option stops every rank with a usage message and status 2
    run "stress --seconds 0 -n 2" 2 "$MPIEXEC" -n 2 "$bin" --seconds 0
}
