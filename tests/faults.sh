# ==== 9. dying and stuck ranks ====
# Sourced by tests/run.sh, which calls faults_tests; it uses run.sh's helpers (report,
# status_words, now, missing) and variables ($tmp, $log, $BUILD, $MPIEXEC).
#
# build/tests/faults makes the last rank die or stop in the middle of a ring allreduce
# whose messages go through p2p's mailboxes (the default transport), or in the middle of
# a 2 MiB mailbox message (the mb- cases: stopped while it takes one, holding slots, so
# its sender's next message goes by MPI and waits for it; killed while it sends one, two
# doorbells rung): tests/faults.c. For each case the job must end soon with a failing status,
# before mpiexec's own time limit ("APPLICATION TIMED OUT" is a failure: dtlab should
# have spoken first), and stderr must hold exactly one "dtlab:" line, naming the right
# rank: the last rank, or for a stuck rank a waiting rank's line naming the stuck one.
# Then a real training run with one rank killed from outside (kill -9), DT_TIMEOUT on a
# stuck rank, and DT_WATCH=0. Case overtime never ends, with no fault: under
# MPIEXEC_TIMEOUT=12 its line must say the job ran out of time, not name a deadlock.
# Takes about 45 s, most of it the stuck rank under MPIEXEC_TIMEOUT=15 (dtlab stops at
# 12 s) and overtime (at 9 s); mb-stall runs under DT_TIMEOUT=3. The stuck and stalled
# cases, which sleep, run in the background beside the others (fault_start).

# fault_expect CASE LAST: the regex the one dtlab line must match, "" for none.
fault_expect() {
    case $1 in
        none) echo "" ;;
        kill) echo "^dtlab: rank $2 \(pid [0-9]+ on [^)]*\) died without a word" ;;
        # (AddressSanitizer keeps SIGSEGV for its own report: make test SANITIZE=...)
        segv) echo "^dtlab: rank $2: (killed by SIGSEGV |stopped by a sanitizer)" ;;
        require) echo "^dtlab: rank $2: tests/faults\.c:[0-9]+: faults: " ;;
        exit) echo "^dtlab: rank $2: the program exited \(status 3\) before dt_final" ;;
        stuck) echo "^dtlab: rank [0-9]+: .*: waited [0-9.]+ s" \
                    "for a message from rank $2 " ;;
        # the sender, waiting for it to take a message, or its right, for its message
        mb-stall) echo "^dtlab: rank [0-9]+: .*: waited [0-9.]+ s for (a message from" \
                       "rank $2[ ,:]|rank $2 to take this rank's message)" ;;
        mb-die) fault_expect kill "$2" ;;
        # (no "stuck", no "deadlock": every wait was short)
        overtime) echo "^dtlab: rank [0-9]+: .*: the job's time limit is nearly reached" \
                       "\(MPIEXEC_TIMEOUT=[0-9]+ s;[^()]*\): this rank had waited only" \
                       "[0-9.]+ s for [^;]*, so nothing looks stuck; .*raise MPIEXEC_TIMEOUT$" ;;
        *) echo "no expectation" ;;
    esac
}

# fault_check NAME N CASE T RE TOOK: judges the run that wrote $log and $tmp/stderr and
# ended with $rc after TOOK seconds, under MPIEXEC_TIMEOUT=T. RE: the dtlab line wanted
# ("" for none, and then status 0); a stuck case's line must come from another rank.
fault_check() {
    local name=$1 n=$2 case=$3 t=$4 re=$5 took=$6 lines speaker
    local at="[$(printf '%.1f s' "$took")]"
    cat "$tmp/stderr" >>"$log"
    # (not the notice of a CUDA build without a GPU: "...; running on the CPU")
    lines=$(grep '^dtlab:' "$tmp/stderr" | grep -vc '; running on the CPU$')
    if grep -q 'APPLICATION TIMED OUT' "$log" || [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        report "$name" 0 "mpiexec's limit ($t s) ended it: dtlab said nothing first  $at"
    elif [ "$re" = "no expectation" ]; then
        report "$name" 0 "tests/faults.sh has no expectation for case '$case'"
    elif [ -z "$re" ]; then
        if [ "$rc" = 0 ] && [ "$lines" = 0 ]; then
            report "$name" 1 "exit 0, no dtlab line  $at"
        else
            report "$name" 0 \
                "$(status_words "$rc") and $lines dtlab lines, want exit 0 and none  $at"
        fi
    elif [ "$rc" = 0 ]; then
        report "$name" 0 "exit 0: the job went on without its rank  $at"
    elif [ "$lines" != 1 ]; then
        report "$name" 0 \
            "$(status_words "$rc") with $lines dtlab lines, want exactly 1  $at"
    elif ! grep -Eq "$re" "$tmp/stderr"; then
        report "$name" 0 "the dtlab line does not match /$re/  $at"
    else
        speaker=$(sed -n 's/^dtlab: rank \([0-9]*\)[ :].*/\1/p' "$tmp/stderr")
        if [[ $case == *stuck || $case == *stall ]] && [ "$speaker" = $((n - 1)) ]; then
            report "$name" 0 "the stuck rank itself spoke; a waiting rank should  $at"
        elif awk -v s="$took" -v t="$t" 'BEGIN { exit !(s >= t) }'; then
            report "$name" 0 "took $took s, not before MPIEXEC_TIMEOUT=$t  $at"
        else
            report "$name" 1 "$(status_words "$rc"), rank $speaker spoke  $at"
        fi
    fi
}

# fault_run N CASE T [VAR=VALUE...]: runs the case at N ranks under MPIEXEC_TIMEOUT=T.
fault_run() {
    fault_start "" "$@"
    fault_end ""
}

# fault_start ID N CASE T [VAR=VALUE...]: fault_run's run, into $tmp/fault-ID.*; with an
# ID, in the background. fault_end ID: waits for it and judges it, its output then in
# $log and $tmp/stderr. The cases that wait (a stuck rank: 12 s, mb-stall, DT_TIMEOUT=2)
# sleep beside the others: every rank of theirs but the busy ones waits politely.
fault_start() {
    local id=$1 n=$2 case=$3 t=$4 f=$tmp/fault-$1
    shift 4
    rm -f "$f".*
    echo "$n $case $t faults $case -n $n${1:+ $*}" >"$f.what"
    {
        now >"$f.t0"
        env MPIEXEC_TIMEOUT="$t" "$@" timeout -k 5 $((t + 15)) "$MPIEXEC" -n "$n" \
            "$faults" "$case" >"$f.log" 2>"$f.err" </dev/null
        echo $? >"$f.rc"
        now >"$f.t1"
    } &
    [ -n "$id" ] || wait $!
}
fault_end() {
    local f=$tmp/fault-$1 n case t name
    while [ ! -s "$f.t1" ]; do wait -n 2>/dev/null || sleep 0.1; done
    read -r n case t name <"$f.what"
    cp "$f.log" "$log"
    cp "$f.err" "$tmp/stderr"
    rc=$(cat "$f.rc")
    fault_check "$name" "$n" "$case" "$t" "$(fault_expect "$case" $((n - 1)))" \
        "$(awk -v a="$(cat "$f.t0")" -v b="$(cat "$f.t1")" 'BEGIN { print b - a }')"
}

faults_tests() {
    local faults=$BUILD/tests/faults train=$BUILD/train case rc t0 took
    if [ ! -x "$faults" ]; then
        missing faults "$faults"
        return
    fi
    local cases
    cases=$("$faults" --list | cut -f1)
    [ -n "$cases" ] || { : >"$log"; report "faults --list" 0 "no cases"; return; }
    # the stuck ranks first, in the background, judged after the others (fault_start)
    local waiting=() id
    fault_start stuck-2 3 stuck 30 DT_TIMEOUT=2
    for case in $cases; do
        if [ "$case" = stuck ]; then
            # dtlab stops at 15 - 3 s; the waits began about 10 s before that, far
            # more than SHORT_WAIT (p2p.c): a stall, not a job out of time
            fault_start stuck 3 "$case" 15
            waiting+=(stuck)
        elif [ "$case" = mb-stall ]; then
            fault_start mb-stall 3 "$case" 30 DT_TIMEOUT=3
            waiting+=(mb-stall)
        elif [ "$case" = overtime ]; then
            # dtlab stops at 12 - 3 s; a wait begun 4.5 s before that (half of 9 s)
            # would count as stuck, which the short waits of this case never are
            fault_run 3 "$case" 12
            if grep -q 'deadlock' "$tmp/stderr"; then
                report "  overtime's line does not speak of a deadlock" 0 "it does"
            fi
        else
            fault_run 3 "$case" 30
        fi
    done
    fault_run 1 kill 30
    fault_run 5 kill 30
    for id in ${waiting[@]+"${waiting[@]}"}; do
        fault_end "$id"
    done
    fault_end stuck-2
    if ! grep -q 'DT_TIMEOUT=2 s' "$tmp/stderr"; then
        report "  the line names DT_TIMEOUT=2 as the limit" 0 "it does not"
    fi

    # DT_WATCH=0: no watcher, so a SIGKILL goes unexplained (mpiexec still ends the job)
    t0=$(now)
    MPIEXEC_TIMEOUT=30 DT_WATCH=0 timeout -k 5 45 "$MPIEXEC" -n 3 "$faults" kill \
        >"$log" 2>"$tmp/stderr" </dev/null
    rc=$?
    took=$(since "$t0")
    cat "$tmp/stderr" >>"$log"
    if [ "$rc" != 0 ] && ! grep -q 'died without a word' "$tmp/stderr" &&
       ! grep -q 'APPLICATION TIMED OUT' "$log"; then
        report "faults kill -n 3 DT_WATCH=0 (no watcher)" 1 \
            "$(status_words "$rc"), no watcher's line  [$took]"
    else
        report "faults kill -n 3 DT_WATCH=0 (no watcher)" 0 \
            "$(status_words "$rc"), want a failure without the watcher's line  [$took]"
    fi

    # a real run: train ddp at 3 ranks, rank 1 killed from outside with kill -9 once the
    # steps have begun; each rank writes "RANK PID" to a file before it becomes train
    if [ ! -x "$train" ]; then
        missing train "$train"
        return
    fi
    local pids=$tmp/pids mp victim i
    : >"$pids"
    t0=$(now)
    MPIEXEC_TIMEOUT=30 timeout -k 5 45 "$MPIEXEC" -n 3 \
        sh -c 'echo "$PMI_RANK $$" >>"$0"; exec "$1" --mode ddp --steps 100000' \
        "$pids" "$train" >"$log" 2>"$tmp/stderr" </dev/null &
    mp=$!
    for ((i = 0; i < 300; i++)); do     # at most 30 s
        [ "$(wc -l <"$pids")" -ge 3 ] && grep -q '^step 3 ' "$log" && break
        sleep 0.1
    done
    victim=$(awk '$1 == 1 { print $2 }' "$pids")
    if [ -z "$victim" ] || ! grep -q '^step 3 ' "$log"; then
        kill "$mp" 2>/dev/null
        wait "$mp"
        report "train ddp -n 3, rank 1 killed with kill -9" 0 \
            "train did not start (no pid for rank 1, or no 'step 3' line in 30 s)"
        return
    fi
    kill -9 "$victim"
    t0=$(now)                           # the time from the kill to the end
    wait "$mp"
    rc=$?
    fault_check "train ddp -n 3, rank 1 killed with kill -9" 3 kill 30 \
        "$(fault_expect kill 1)" "$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')"
}
