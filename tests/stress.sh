# Section 11 of tests/run.sh: random collectives against MPICH's, for a bounded time.
#
# Sourced by run.sh, which then calls stress_tests; it uses run.sh's helpers (run,
# report, status_words, now, missing) and its variables ($BUILD, $MPIEXEC, $log).
# $BUILD/tests/stress (tests/stress.c) runs at 1, 2, 3, 5 and 8 ranks (and 4, 6, 7 too
# when STRESS_SECONDS is 30 or more), each for STRESS_SECONDS seconds (default 4, so
# the section takes about 30 s). Each run prints its seed; a mismatch fails the run
# and the FAIL line says how to replay it. `make stress` runs the section longer.
#
#     STRESS_SECONDS=60 SECTIONS=11 bash tests/run.sh

stress_tests() {
    local bin=$BUILD/tests/stress secs=${STRESS_SECONDS:-4} ranks="1 2 3 5 8"
    local n t0 rc took line replay mism seed
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

    for n in $ranks; do
        # well above the run's own length: only a hang reaches it
        t0=$(now)
        MPIEXEC_TIMEOUT=$((2 * secs + 60)) "$MPIEXEC" -n "$n" "$bin" --seconds "$secs" \
            >"$log" 2>&1 </dev/null
        rc=$?
        took=$(since "$t0")
        line=$(grep -m1 '^stress: [0-9]* collectives in' "$log")
        replay=$(grep -m1 '^stress: replay: ' "$log" | sed 's/^stress: replay: //')
        mism=$(sed -n 's/.*, \([0-9]*\) mismatch\(es\)\{0,1\}$/\1/p' <<<"$line")
        seed=$(sed -n 's/^stress: seed \([0-9]*\),.*/\1/p' "$log" | head -n 1)
        if grep -q 'APPLICATION TIMED OUT' "$log"; then
            report "stress -n $n" 0 "timed out after $((2 * secs + 60)) s (a deadlock?)  [$took]"
        elif [ "$rc" = 0 ] && [ "$mism" = 0 ] && [[ "$line" != "stress: 0 "* ]]; then
            report "stress -n $n" 1 "${line#stress: } (seed $seed)  [$took]"
        elif [ -n "$replay" ]; then
            report "stress -n $n" 0 "$mism mismatches; replay: $replay  [$took]"
        else
            report "stress -n $n" 0 "$(status_words "$rc"): ${line:-no summary line}  [$took]"
        fi
    done

    # a bad option stops every rank with a usage message and status 2
    run "stress --seconds 0 -n 2" 2 "$MPIEXEC" -n 2 "$bin" --seconds 0
}
