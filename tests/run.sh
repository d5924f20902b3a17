#!/usr/bin/env bash
# dtlab's test runner. `make test` builds everything and then runs
#
#     BUILD=build MPIEXEC=mpiexec bash tests/run.sh
#
# It builds nothing. In order it runs
#   1. every unit suite, $BUILD/tests/unit_*            (no MPI)
#   2. every multi-rank suite, $BUILD/tests/mpi_*, under `$MPIEXEC -n N` for N = 1..5,
#      and $BUILD/tests/misuse: each wrong call must stop every rank with dtlab's message
#   3. every lesson in $BUILD/lessons at 1..5 ranks with its default arguments (must exit
#      0), with --help (exit 0) and with --bogus (a usage error: exit 2)
#   4. $BUILD/dttrace on a trace that a lesson wrote with --trace
# and prints one line per run, PASS or FAIL, with the output of the runs that failed.
# The last line is "N passed, M failed"; the exit status is 0 only when nothing failed.
#
# Every MPI run has a time limit, MPIEXEC_TIMEOUT seconds (default 120), so a deadlock
# fails the run instead of hanging the job; programs run without mpiexec get the same
# limit through timeout(1) where it exists.
#
# Knobs (environment): BUILD, MPIEXEC, MPIEXEC_TIMEOUT, RANKS (default "1 2 3 4 5").
set -u

cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec}
RANKS=${RANKS:-1 2 3 4 5}
export MPIEXEC_TIMEOUT=${MPIEXEC_TIMEOUT:-120}

passed=0
failed=0
failures=""
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtlab-tests.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
log=$tmp/log

limit=()
if command -v timeout >/dev/null 2>&1; then
    limit=(timeout "$MPIEXEC_TIMEOUT")
fi

now() { date +%s.%N 2>/dev/null || date +%s; }

# Why a run ended with status $1, in words.
status_words() {
    case $1 in
        0) echo "exit 0" ;;
        124) echo "timed out after ${MPIEXEC_TIMEOUT} s" ;;
        1[3-9][0-9]) echo "exit $1: killed by signal $(( $1 - 128 ))" ;;
        *) echo "exit $1" ;;
    esac
}

# report NAME OK DETAIL: the PASS/FAIL line; on failure, the end of the run's log.
report() {
    if [ "$2" = 1 ]; then
        passed=$((passed + 1))
        printf 'PASS  %-44s %s\n' "$1" "$3"
    else
        failed=$((failed + 1))
        failures="$failures
  $1"
        printf 'FAIL  %-44s %s\n' "$1" "$3"
        if [ -s "$log" ]; then
            tail -n 60 "$log" | sed 's/^/      | /'
        fi
    fi
}

# run NAME WANT CMD...: runs CMD, output to the log; passes when its status is WANT.
# For Check suites the detail is Check's closing line ("100%: Checks: ...").
run() {
    local name=$1 want=$2 t0 t1 rc detail
    shift 2
    t0=$(now)
    "$@" >"$log" 2>&1 </dev/null
    rc=$?
    t1=$(now)
    detail=$(grep -E '^[0-9]+%: Checks: ' "$log" | tail -n 1)
    [ -n "$detail" ] || detail=$(status_words "$rc")
    if grep -q 'APPLICATION TIMED OUT' "$log"; then      # hydra's words for MPIEXEC_TIMEOUT
        detail="timed out after ${MPIEXEC_TIMEOUT} s (a deadlock?)"
    fi
    detail="$detail  [$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f s", b - a }')]"
    if [ "$rc" = "$want" ]; then
        report "$name" 1 "$detail"
    else
        report "$name" 0 "$detail, want $(status_words "$want")"
    fi
}

# A suite that should exist (its source is in tests/) but was not built fails.
missing() {
    : >"$log"
    report "$1" 0 "not built: $2 is missing (did the build fail?)"
}

echo "dtlab tests: BUILD=$BUILD MPIEXEC=$MPIEXEC MPIEXEC_TIMEOUT=$MPIEXEC_TIMEOUT"

# ==== 1. unit suites ====
found=0
for src in tests/unit_*.c; do
    [ -e "$src" ] || continue
    found=1
    name=$(basename "$src" .c)
    bin=$BUILD/tests/$name
    if [ -x "$bin" ]; then
        run "$name" 0 ${limit[@]+"${limit[@]}"} "$bin"
    else
        missing "$name" "$bin"
    fi
done
[ "$found" = 1 ] || { : >"$log"; report "unit suites" 0 "none found in tests/"; }

# ==== 2. multi-rank suites ====
for src in tests/mpi_*.c; do
    [ -e "$src" ] || continue
    name=$(basename "$src" .c)
    bin=$BUILD/tests/$name
    if [ ! -x "$bin" ]; then
        missing "$name" "$bin"
        continue
    fi
    for n in $RANKS; do
        run "$name -n $n" 0 "$MPIEXEC" -n "$n" "$bin"
    done
done

# ==== 2b. misuse: every rank stops soon, with dtlab's message, and a failing status ====
misuse=$BUILD/tests/misuse
if [ -x "$misuse" ]; then
    while read -r case expect; do
        name="misuse $case -n 3"
        env=()
        [ "$case" = bad-algo-env ] && env=(env DT_ALLREDUCE_ALGO=tree)
        t0=$(now)
        ${env[@]+"${env[@]}"} "$MPIEXEC" -n 3 "$misuse" "$case" >"$log" 2>&1 </dev/null
        rc=$?
        t1=$(now)
        took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f s", b - a }')
        if [ "$rc" = 0 ]; then
            report "$name" 0 "exit 0: the misuse went through  [$took]"
        elif grep -q 'APPLICATION TIMED OUT' "$log"; then
            report "$name" 0 "timed out: a rank was left waiting  [$took]"
        elif ! grep -q "^dtlab: .*$expect" "$log"; then
            report "$name" 0 "exit $rc without dtlab's message about '$expect'  [$took]"
        else
            report "$name" 1 "$(status_words "$rc"), message names '$expect'  [$took]"
        fi
    done < <("$misuse" --list)
else
    missing misuse "$misuse"
fi

# ==== 3. lessons ====
lessons=()
for bin in "$BUILD"/lessons/*; do
    [ -f "$bin" ] && [ -x "$bin" ] && lessons+=("$bin")
done
if [ ${#lessons[@]} -eq 0 ]; then
    echo "(no lessons built in $BUILD/lessons: skipping the lesson runs)"
fi
for bin in "${lessons[@]}"; do
    name=lessons/$(basename "$bin")
    for n in $RANKS; do
        run "$name -n $n" 0 "$MPIEXEC" -n "$n" "$bin"
    done
    run "$name --help" 0 "$MPIEXEC" -n 1 "$bin" --help
    if [ "$(grep -c . "$log")" -lt 2 ]; then
        report "$name --help prints a usage text" 0 "it printed $(grep -c . "$log") lines"
    fi
    run "$name --bogus" 2 "$MPIEXEC" -n 1 "$bin" --bogus
    run "$name --bogus -n 2" 2 "$MPIEXEC" -n 2 "$bin" --bogus
done

# ==== 4. dttrace on a lesson's trace ====
dttrace=$BUILD/dttrace
if [ ! -x "$dttrace" ]; then
    missing dttrace "$dttrace"
elif [ ${#lessons[@]} -eq 0 ]; then
    echo "(no lesson to write a trace: skipping dttrace)"
else
    # the ring allreduce lesson if there is one, else the first lesson
    writer=${lessons[0]}
    for bin in "${lessons[@]}"; do
        case $bin in */08_ring_allreduce) writer=$bin ;; esac
    done
    trace=$tmp/lesson.trace
    run "$(basename "$writer") --trace (4 ranks)" 0 "$MPIEXEC" -n 4 "$writer" --trace "$trace"
    if [ -s "$trace" ] && head -n 1 "$trace" | grep -q '^# dtlab-trace '; then
        report "trace file written" 1 "$(grep -vc '^#' "$trace") events"
        # The ranks' clocks agree: every message is received no earlier than it began to
        # be sent. Pairs the k-th send from a to b with the k-th receive by b from a
        # (MPI keeps that order); columns: t0 t1 rank kind peer ...
        bad=$(awk '!/^#/ && $4 == "send" { s[$3 " " $5, ns[$3 " " $5]++] = $1 }
                   !/^#/ && $4 == "recv" { r[$5 " " $3, nr[$5 " " $3]++] = $2 }
                   END { bad = 0; pairs = 0
                         for (k in ns) for (i = 0; i < ns[k]; i++) {
                             if (!((k, i) in r)) { bad++; continue }
                             pairs++
                             if (r[k, i] + 1e-6 < s[k, i]) bad++ }
                         print bad, pairs }' "$trace")
        if [ "${bad%% *}" = 0 ] && [ "${bad#* }" -gt 0 ]; then
            report "trace clocks agree (recv ends after send begins)" 1 "${bad#* } messages"
        else
            report "trace clocks agree (recv ends after send begins)" 0 \
                "bad and total send/recv pairs: $bad"
        fi
        run "dttrace FILE" 0 ${limit[@]+"${limit[@]}"} "$dttrace" "$trace"
        run "dttrace --chrome OUT FILE" 0 ${limit[@]+"${limit[@]}"} "$dttrace" \
            --chrome "$tmp/lesson.json" "$trace"
        : >"$log"
        if [ -s "$tmp/lesson.json" ] && grep -q '"traceEvents"\|^\[' "$tmp/lesson.json"; then
            report "dttrace Chrome JSON" 1 "$(wc -c <"$tmp/lesson.json") bytes"
        else
            report "dttrace Chrome JSON" 0 "missing, empty or not trace JSON"
        fi
    else
        : >"$log"
        report "trace file written" 0 "no trace, or no '# dtlab-trace' header"
    fi
    # bad input: a usage error, and a missing or garbled file (an error, not a crash)
    run "dttrace --bogus" 2 ${limit[@]+"${limit[@]}"} "$dttrace" --bogus
    printf '# dtlab-trace 1\nthis is not an event\n' >"$tmp/garbled.trace"
    for f in "$tmp/no-such.trace" "$tmp/garbled.trace"; do
        ${limit[@]+"${limit[@]}"} "$dttrace" "$f" >"$log" 2>&1 </dev/null
        rc=$?
        name="dttrace on a $(basename "$f" .trace) file"
        if [ "$rc" -ge 1 ] && [ "$rc" -lt 124 ]; then
            report "$name" 1 "$(status_words "$rc")"
        else
            report "$name" 0 "$(status_words "$rc"), want an error"
        fi
    done
fi

echo
[ "$failed" -eq 0 ] || echo "failed:$failures"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
