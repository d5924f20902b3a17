#!/usr/bin/env bash
# dtlab's test runner. `make test` builds everything and then runs
#
#     BUILD=build MPIEXEC=mpiexec bash tests/run.sh
#
# It builds nothing. In order it runs
#   1. every unit suite, $BUILD/tests/unit_*            (no MPI), and scripts/layers.sh:
#      no circle among the files of lib/ and viz/ (docs/design.md)
#   2. every multi-rank suite, $BUILD/tests/mpi_*, under `$MPIEXEC -n N` for N = 1..5
#      (p2p's mailboxes on, the default), mpi_p2p and mpi_collectives again at 2 and 3
#      ranks with DT_P2P=staging (everything through MPI), and $BUILD/tests/misuse: each
#      wrong call must stop every rank with dtlab's message
#   3. every lesson in $BUILD/lessons at 1..5 ranks (4 left out where it is only another
#      even count) with its default arguments (must exit 0 and end naming the code it
#      teaches), with --help (exit 0) and, when section 8 does not run, with --bogus (a
#      usage error: exit 2)
#   4. $BUILD/dttrace on a trace that a lesson wrote with --trace, and on hand-written
#      ones with copies between host and GPU inside and outside a training run's steps
#   5. the training driver, $BUILD/train: every mode, impossible combinations, a trace
#   6. the viewer, $BUILD/dtviz: its model against lesson traces, the training
#      timetable against every mode's trace and lib/schedule, pictures read back pixel
#      by pixel, keys under SDL's dummy driver and in a real window under Xvfb, every
#      algorithm drawn headless, bad input, corrupted traces, libFuzzer on the trace
#      reader, the model and the timetable for a bounded time, and `make demo` without
#      a display
#   7. the grader (tests/grade/grade.sh): full marks for dtlab's reference, zero for the
#      untouched exercises, planted mistakes losing points with the right message,
#      hidden tests, bad settings
#   8. bad input to every program a user runs: a usage message and exit 2 on every rank
#   9. a rank that dies or hangs: the job ends soon with a message naming the rank
#  10. train's checkpoints: resumed runs equal uninterrupted ones bit for bit; damaged
#      or foreign checkpoints refused; a kill while writing loses nothing good
#  11. random collectives against MPICH's at 1 to 8 ranks, for a bounded time
#  12. mixture of experts: train --mode moe on N ranks against one rank, lesson 19
#  13. compressed gradients: ddp --compress, round trips, error feedback, lesson 20
#  14. synchronous against asynchronous accumulation, lesson 21
#  15. many hosts: network namespaces joined by veth (skipped where they cannot be made)
#  17. fsdp --prefetch: the same weights as without, bit for bit, and as serial's; the
#      overlap in its trace
#  18. elastic training: scripts/elastic.sh restarts a job whose rank died from its last
#      checkpoint (on as many ranks, or fewer), to the weights of a job never stopped;
#      lesson 25
#  19. the docs: every relative link and anchor of README.md and docs/ resolves, and
#      their cheap commands run (tests/docs.sh)
#  20. the grader as a course uses it: make gradescope's zip and its run_autograder on
#      a layout like Gradescope's, make grade-class on 20 generated students
# and prints one line per run, PASS or FAIL, with the output of the runs that failed.
# The last line is "N passed, M failed" (and ", K skipped" when a test cannot run on this
# machine, each SKIP line saying why); the exit status is 0 only when nothing failed.
#
# Every MPI run has a time limit, MPIEXEC_TIMEOUT seconds (default 120), so a deadlock
# fails the run instead of hanging the job; programs run without mpiexec get the same
# limit through timeout(1) where it exists.
#
# Knobs (environment): BUILD, MPIEXEC, MPIEXEC_TIMEOUT, RANKS (default "1 2 3 4 5"),
# SECTIONS (default "all"; e.g. SECTIONS="5 8" runs only sections 5 and 8),
# QUICK=1 (`make check`: sections 1-3 at RANKS "1 3", unless set otherwise),
# FUZZ_SECONDS (libFuzzer's time in section 6, default 10), STRESS_SECONDS (section 11's
# time per rank count, default 4).
set -u

cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec}
if [ "${QUICK:-0}" = 1 ]; then         # make check: a minute or two
    RANKS=${RANKS:-1 3}
    SECTIONS=${SECTIONS:-1 2 3}
fi
RANKS=${RANKS:-1 2 3 4 5}
SECTIONS=${SECTIONS:-all}
export MPIEXEC_TIMEOUT=${MPIEXEC_TIMEOUT:-120}

passed=0
failed=0
skipped=0
failures=""
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtlab-tests.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
log=$tmp/log

limit=()
if command -v timeout >/dev/null 2>&1; then
    limit=(timeout "$MPIEXEC_TIMEOUT")
fi

# timed N FUNCTION: runs a section's function, and keeps how long it took for the
# last lines (make test should stay under 10 minutes: this says where the time goes).
took_by_section=""
timed() {
    local timed_section=$1 timed_t0=$SECONDS   # (names the sections' functions never use)
    shift
    "$@"
    took_by_section="$took_by_section  $timed_section: $((SECONDS - timed_t0))"
}

# want N: whether section N is to run.
want() { [ "$SECTIONS" = all ] || [[ " $SECTIONS " == *" $1 "* ]]; }

now() { date +%s.%N 2>/dev/null || date +%s; }
# since T0: the seconds from T0 (a `now`) to now, as "1.5 s".
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

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

# skip NAME WHY: a test this machine cannot run, and why (counted, never a pass).
skip() {
    skipped=$((skipped + 1))
    printf 'SKIP  %-44s %s\n' "$1" "$2"
}

# run NAME WANT CMD...: runs CMD, output to the log; passes when its status is WANT.
# For Check suites the detail is Check's closing line ("100%: Checks: ...").
run() {
    local name=$1 want=$2 t0 rc
    shift 2
    t0=$(now)
    "$@" >"$log" 2>&1 </dev/null
    rc=$?
    ran "$name" "$want" "$rc" "$(since "$t0")"
}

# ran NAME WANT RC TOOK: run's verdict on a command that ended with status RC after TOOK
# ("1.5 s"), its output in the log.
ran() {
    local name=$1 want=$2 rc=$3 detail
    detail=$(grep -E '^[0-9]+%: Checks: ' "$log" | tail -n 1)
    [ -n "$detail" ] || detail=$(status_words "$rc")
    # hydra's words for MPIEXEC_TIMEOUT
    if grep -q 'APPLICATION TIMED OUT' "$log"; then
        detail="timed out after ${MPIEXEC_TIMEOUT} s (a deadlock?)"
    fi
    detail="$detail  [$4]"
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

# Two at a time: runs that do not depend on each other may overlap (2 cores; much of a
# run is one process, or mpiexec starting and ending ranks), each into files of its own.
# job ID CMD...: runs CMD now, its output, status and time into $jobdir/ID.log, ID.rc
# and ID.took. job_bg ID CMD...: the same in the background, once fewer than two run
# (then `wait` for them). job_ran NAME WANT ID: run's verdict on it, its output the log.
jobdir=$tmp/jobs
mkdir -p "$jobdir"
job() {
    local id=$1 t0
    shift
    t0=$(now)
    "$@" >"$jobdir/$id.log" 2>&1 </dev/null
    echo $? >"$jobdir/$id.rc"
    since "$t0" >"$jobdir/$id.took"
}
job_par=2
job_bg() {
    while [ "$(jobs -rp | wc -l)" -ge "$job_par" ]; do wait -n; done
    job "$@" &
}
job_ran() {
    cp "$jobdir/$3.log" "$log" 2>/dev/null || : >"$log"
    ran "$1" "$2" "$(cat "$jobdir/$3.rc" 2>/dev/null)" "$(cat "$jobdir/$3.took" 2>/dev/null)"
}

echo "dtlab tests: BUILD=$BUILD MPIEXEC=$MPIEXEC MPIEXEC_TIMEOUT=$MPIEXEC_TIMEOUT"

# ==== 1. unit suites ====
unit_tests() {
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
    # The layers (docs/design.md): no file of lib/ or viz/ calls back into one that calls
    # it, read from the objects built (make check builds no viewer: lib alone there)
    local parts=(lib)
    [ -d "$BUILD/obj/viz" ] && parts+=(viz)
    run "layers: no circles in ${parts[*]}" 0 \
        bash scripts/layers.sh --build "$BUILD" "${parts[@]}"
}
want 1 && timed 1 unit_tests

# ==== 2. multi-rank suites ====
# Each suite runs at every count of $RANKS with p2p's default transport (DT_P2P=auto:
# mailboxes between the ranks of a host, p2p.h) or the one DT_P2P names; mpi_p2p and
# mpi_collectives run again with DT_P2P=staging at 2 and 3 ranks (those of them in
# $RANKS), so the path through MPI alone stays tested. mpi_p2p takes seconds: its limit
# is 30 s, so a deadlock (dtlab names it at 27 s) costs half a minute, not two.
multi_tests() {
    local via=${DT_P2P:+ (DT_P2P=$DT_P2P)} limit_s n
    for src in tests/mpi_*.c; do
        [ -e "$src" ] || continue
        name=$(basename "$src" .c)
        bin=$BUILD/tests/$name
        if [ ! -x "$bin" ]; then
            missing "$name" "$bin"
            continue
        fi
        limit_s=$MPIEXEC_TIMEOUT
        [ "$name" = mpi_p2p ] && [ "$limit_s" -gt 30 ] && limit_s=30
        for n in $RANKS; do
            MPIEXEC_TIMEOUT=$limit_s run "$name -n $n$via" 0 "$MPIEXEC" -n "$n" "$bin"
        done
        case $name in mpi_p2p | mpi_collectives) ;; *) continue ;; esac
        for n in 2 3; do
            [[ " $RANKS " == *" $n "* ]] || continue
            MPIEXEC_TIMEOUT=$limit_s run "$name -n $n (DT_P2P=staging)" 0 \
                env DT_P2P=staging "$MPIEXEC" -n "$n" "$bin"
        done
    done

    # ==== 2b. misuse: every rank stops soon, with dtlab's message, a failing status ====
    # Two cases at a time: a case is mostly mpiexec starting and ending 3 ranks, and
    # nothing in it is timed. misuse_case I CASE: runs one into $tmp/misuse.I.*.
    misuse=$BUILD/tests/misuse
    misuse_case() {
        local env=() t0
        [ "$2" = bad-algo-env ] && env=(env DT_ALLREDUCE_ALGO=tree)
        [ "$2" = bad-stage-env ] && env=(env DT_STAGE_KIB=1.5)
        [ "$2" = bad-blas-env ] && env=(env DT_BLAS=2)
        [ "$2" = bad-blas-threads-env ] && env=(env DT_BLAS_THREADS=0)
        t0=$(now)
        ${env[@]+"${env[@]}"} "$MPIEXEC" -n 3 "$misuse" "$2" >"$tmp/misuse.$1.log" 2>&1 \
            </dev/null
        echo $? >"$tmp/misuse.$1.rc"
        since "$t0" >"$tmp/misuse.$1.took"
    }
    if [ -x "$misuse" ]; then
        local cases=() i case expect rc took
        mapfile -t cases < <("$misuse" --list)
        for ((i = 0; i < ${#cases[@]}; i += 2)); do
            misuse_case "$i" "${cases[i]%% *}" &
            [ $((i + 1)) -lt ${#cases[@]} ] && misuse_case $((i + 1)) "${cases[i + 1]%% *}" &
            wait
        done
        for ((i = 0; i < ${#cases[@]}; i++)); do
            case=${cases[i]%% *}
            expect=${cases[i]#* }
            name="misuse $case -n 3"
            cp "$tmp/misuse.$i.log" "$log"
            rc=$(cat "$tmp/misuse.$i.rc")
            took=$(cat "$tmp/misuse.$i.took")
            if [ "$rc" = 0 ]; then
                report "$name" 0 "exit 0: the misuse went through  [$took]"
            elif grep -q 'APPLICATION TIMED OUT' "$log"; then
                report "$name" 0 "timed out: a rank was left waiting  [$took]"
            elif ! grep -q "^dtlab: .*$expect" "$log"; then
                report "$name" 0 \
                    "exit $rc without dtlab's message about '$expect'  [$took]"
            else
                report "$name" 1 "$(status_words "$rc"), message names '$expect'  [$took]"
            fi
        done
    else
        missing misuse "$misuse"
    fi
}
want 2 && timed 2 multi_tests

# ==== 3. lessons ====
lessons=()                 # sections 3 and 4
for bin in "$BUILD"/lessons/*; do
    [ -f "$bin" ] && [ -x "$bin" ] && lessons+=("$bin")
done
# code_named NAME: why the run in $log does not end with the line that names the code
# it teaches, "The code: lib/a.c (f, g), lib/b.c (h)" (then, with --trace, the line
# saying where the trace went): every file must exist and define every function named
# beside it (a line starting with a type, then "f("); "" when it does.
code_named() {
    local line item path f why=""
    line=$(grep -v '^[[:space:]]*$' "$log" | grep -v '; running on the CPU$' |
           grep -v '^dtlab: trace of [0-9]* events* from [0-9]* ranks* written to ' | tail -n 1)
    if [[ $line != "The code: "* ]]; then
        echo "$1 ends with '${line:0:50}', not 'The code: ...'"
        return
    fi
    while IFS= read -r item; do       # the items, split at commas outside parentheses
        path=${item%% *}
        if [ ! -f "$path" ]; then
            why="$why; $1 names $path, which does not exist"
            continue
        fi
        for f in $(sed -n 's/^[^(]*(\(.*\))$/\1/p' <<<"$item" | tr ',' ' '); do
            grep -Eq "^[A-Za-z_].*[^A-Za-z0-9_]$f\(" "$path" ||
                why="$why; $1 names $f, which $path does not define"
        done
    done < <(awk '{ d = 0; s = ""
                    for (i = 1; i <= length($0); i++) {
                        c = substr($0, i, 1)
                        if (c == "(") d++
                        if (c == ")") d--
                        if (c == "," && d == 0) { print s; s = ""; continue }
                        if (c == " " && s == "") continue
                        s = s c }
                    print s }' <<<"${line#The code: }")
    echo "${why#; }"
}

# p2p_transports NAME N [staging]: lesson 02's part 3 in $log, a run at N ranks on this host
# with the default sizes (64 KiB, 1 MiB, 16 MiB): every shift matches MPI_Sendrecv, each
# size has a row through MPI (mpi, or staging for GPU buffers) and, unless DT_P2P=staging
# (third argument, or set for the whole test run), the two that fit a mailbox (64 KiB and
# 1 MiB, not 16 MiB: more than an outbox holds) one through it (shm) with 2 copies; ipc is not asked for (it needs ranks sharing a GPU with working CUDA IPC).
# At one rank the lesson must say why nothing is shown.
p2p_transports() {
    local why="" rows
    if [ "$2" = 1 ]; then
        grep -q '^Nothing is shown at one rank' "$log" || why="it does not say why nothing is shown"
    else
        grep -q '^   check: all match MPI_Sendrecv' "$log" || why="; part 3's check did not pass"
        rows=$(grep -cE '^ +[0-9.]+ [KM]iB  (mpi|staging) ' "$log")
        [ "$rows" = 3 ] || why="$why; $rows rows through MPI, not 3"
        rows=$(grep -cE '^ +[0-9.]+ [KM]iB  shm +[0-9.]+ us .* 2 x S = ' "$log")
        if [ "${3:-${DT_P2P:-auto}}" = staging ]; then
            [ "$rows" = 0 ] || why="$why; $rows shm rows under DT_P2P=staging"
            grep -q '^   shm: not shown here: DT_P2P=staging' "$log" ||
                why="$why; no word on why shm is not shown"
        else    # 64 KiB and 1 MiB; 16 MiB is more than an outbox holds: MPI
            [ "$rows" = 2 ] || why="$why; $rows shm rows, not 2"
        fi
        why=${why#; }
    fi
    [ -z "$why" ] && report "$1: part 3's transports" 1 "rows and checks as expected" ||
        report "$1: part 3's transports" 0 "$why"
}

# hello_torchrun BIN: dt_init's rule for the GPU's local rank (lib/core.h,
# dt_gpu_local_rank), as lesson 01 prints it: torchrun's LOCAL_RANK where no MPI launcher
# started the process (each torchrun process is an MPI job of one rank), MPI's own count
# under mpiexec, and a LOCAL_RANK that is no whole number refused with status 2, quoted.
# Alone, the torchrun table shows the variables set (RANK 1, WORLD_SIZE 2, LOCAL_RANK 3)
# and marks what dtlab derives with '*'; under mpiexec its row must carry the rank, size
# and local rank MPI gave. WORLD_SIZE above 1 without a launcher gets a line, LOCAL_RANK
# or not.
hello_torchrun() {
    local bin=$1 why=""
    env -u PMI_RANK -u PMIX_RANK LOCAL_RANK=3 WORLD_SIZE=2 RANK=1 \
        ${limit[@]+"${limit[@]}"} "$bin" --device cpu >"$log" 2>&1 </dev/null ||
        why="; alone with LOCAL_RANK=3: exit $?"
    grep -q 'local rank 3 (LOCAL_RANK' "$log" || why="$why; alone, LOCAL_RANK=3 not used"
    grep -qE '^ +0 +1 +2 +3 +1\* +0\*  ' "$log" ||
        why="$why; alone, no torchrun row 1 2 3 (set) 1* 0* (derived)"
    grep -qE '^LOCAL_RANK +3$' "$log" || why="$why; alone, LOCAL_RANK=3 not in the table"
    grep -q '^dtlab: WORLD_SIZE=2 but no MPI launcher' "$log" ||
        why="$why; no word that WORLD_SIZE=2 is not this job's size"
    env -u PMI_RANK -u PMIX_RANK -u LOCAL_RANK WORLD_SIZE=2 ${limit[@]+"${limit[@]}"} \
        "$bin" --device cpu >"$log" 2>&1 </dev/null || why="$why; WORLD_SIZE=2: exit $?"
    grep -q '^dtlab: WORLD_SIZE=2 but no MPI launcher' "$log" ||
        why="$why; WORLD_SIZE=2 without LOCAL_RANK: no line"
    LOCAL_RANK=5 "$MPIEXEC" -n 3 "$bin" --device cpu >"$log" 2>&1 </dev/null ||
        why="$why; -n 3 with LOCAL_RANK=5: exit $?"
    grep -q 'local rank 0 (MPI: the ranks on this host)' "$log" ||
        why="$why; under mpiexec LOCAL_RANK=5 was taken over MPI's local rank"
    grep -qE '^ +2 +2 +3 +2 +3 +0  ' "$log" || why="$why; no torchrun row for rank 2 of 3"
    env -u PMI_RANK -u PMIX_RANK LOCAL_RANK=x ${limit[@]+"${limit[@]}"} "$bin" \
        --device cpu >"$log" 2>&1 </dev/null
    local rc=$?
    [ "$rc" = 2 ] && grep -q "^dtlab: LOCAL_RANK.*, not 'x'\$" "$log" ||
        why="$why; LOCAL_RANK=x: exit $rc, want 2 and a dtlab line quoting it"
    why=${why#; }
    [ -z "$why" ] && report "01_hello: torchrun's variables and LOCAL_RANK" 1 \
        "LOCAL_RANK alone, MPI's under mpiexec, x refused" ||
        report "01_hello: torchrun's variables and LOCAL_RANK" 0 "$why"
}

# modes_table BIN: lesson 24 at 4 ranks with --csv: a row for each of its 11 modes, with
# the memory and bytes columns filled and the formula beside each; every mode at
# serial's weights (the lesson's own check); the notes' claims judged one by one; and,
# as for every lesson's run, its last line naming the code (lesson_tests' -n 4 run).
modes_table() {
    local bin=$1 why="" rows
    MPIEXEC_TIMEOUT=120 "$MPIEXEC" -n 4 "$bin" --csv "$tmp/modes.csv" >"$log" 2>&1 </dev/null ||
        why="; exit $?"
    local named                # (lesson_tests runs no other -n 4: this run is that one)
    named=$(code_named "24_modes -n 4")
    [ -z "$named" ] || unnamed="$unnamed; $named"
    rows=$(awk -F, 'NR > 1 && NF == 16 && $2 > 0 && $3 > 0' "$tmp/modes.csv" 2>/dev/null |
           wc -l)
    [ "$rows" = 11 ] || why="$why; $rows full CSV rows, not 11"
    for m in serial dp dp-threads ddp fsdp-z1 fsdp-z2 fsdp-z3 tp pp-gpipe pp-1f1b hybrid; do
        grep -q "^$m  *[0-9.]* ([0-9.]*) " "$log" || why="$why; no memory row for $m"
    done
    [ "$(grep -cE '^            here: .*: (agrees|DIFFERS on this machine)$' "$log")" -ge 10 ] ||
        why="$why; fewer than 10 claims judged"
    grep -q '^check: every mode that ran reached .*: PASS' "$log" || why="$why; no PASS"
    why=${why#; }
    [ -z "$why" ] && report "24_modes -n 4: every mode's row, claims, CSV" 1 "11 rows" ||
        report "24_modes -n 4: every mode's row, claims, CSV" 0 "$why"
    # at 2 ranks the server and the ring send equal bytes: no DIFFERS for that
    MPIEXEC_TIMEOUT=60 "$MPIEXEC" -n 2 "$bin" --steps 2 >"$log" 2>&1 </dev/null
    grep -q 'formula 1.00, equal at N=2 by arithmetic: agrees$' "$log" &&
        report "24_modes -n 2: dp's bytes equal DDP's by arithmetic" 1 "agrees" ||
        report "24_modes -n 2: dp's bytes equal DDP's by arithmetic" 0 "no such verdict"
}

# one_run_trace NAME N WANT BIN ARGS...: a lesson that trains several runs records one
# with --trace (lib/trace.h: a trace describes one training run): its file has exactly one
# "# train" line, and it matches "# train WANT" (WANT a grep pattern).
one_run_trace() {
    local name=$1 n=$2 want=$3 trace=$tmp/one-run.trace k
    shift 3
    rm -f "$trace"
    MPIEXEC_TIMEOUT=60 "$MPIEXEC" -n "$n" "$@" --trace "$trace" >"$log" 2>&1 </dev/null ||
        { report "$name: one run traced" 0 "$(status_words $?)"; return; }
    one_trace_check "$name" "$want"
}
# one_trace_check NAME WANT: one_run_trace's verdict on $tmp/one-run.trace.
one_trace_check() {
    local name=$1 want=$2 trace=$tmp/one-run.trace k
    k=$(grep -c '^# train ' "$trace" 2>/dev/null)
    if [ "$k" = 1 ] && grep -q "^# train $want" "$trace"; then
        report "$name: one run traced" 1 "$(grep '^# train ' "$trace" | cut -c9-60)"
    else
        report "$name: one run traced" 0 "${k:-no} '# train' lines; want one, '$want ...'"
    fi
}

lesson_tests() {
    local unnamed="" why
    if [ ${#lessons[@]} -eq 0 ]; then
        echo "(no lessons built in $BUILD/lessons: skipping the lesson runs)"
    fi
    local traced n4 trace=$tmp/one-run.trace
    for bin in "${lessons[@]}"; do
        name=lessons/$(basename "$bin")
        # A lesson that trains several runs records one with --trace (one_run_trace): the
        # default run at 2 ranks does, for those below, which judges the trace too.
        case $name in
        lessons/11_dp) traced="mode dp async 0 " ;;
        lessons/12_ddp) traced="mode ddp bucket_kb 20 overlap on " ;;
        lessons/13_accum) traced="mode ddp .* accum 4 " ;;
        lessons/15_tp) traced="mode tp tp 2 tp_style megatron " ;;
        lessons/16_pp) traced="mode pp schedule 1f1b " ;;
        lessons/17_mixed) traced="mode ddp .* precision fp16 " ;;
        lessons/20_compress) traced="mode ddp .* compress sign feedback on " ;;
        lessons/21_async) traced="mode dp async 2 " ;;
        lessons/14_fsdp) traced="mode fsdp zero 3 offload off prefetch on " ;;
        *) traced="" ;;
        esac
        # 4 ranks are left out, when 2 run, for the lessons where 4 is only another even
        # count (no power-of-two algorithm, no grid of ranks to factor; a batch, where
        # there is one, that 4 divides as 2 does); 1, 3 and 5 (odd, and a remainder) stay.
        # 24_modes runs at 4 ranks in modes_table, judged there as here.
        case $name in
        lessons/1[1-4]_* | lessons/17_* | lessons/19_* | lessons/2[0-3]_* | lessons/25_* | \
        lessons/28_* | lessons/29_*) n4=0 ;;
        lessons/24_modes) n4=table ;;
        *) n4=1 ;;
        esac
        [ "$n4" != 0 ] || [[ " $RANKS " == *" 2 "* ]] || n4=1
        for n in $RANKS; do
            [ "$n" != 4 ] || [ "$n4" = 1 ] || continue
            if [ "$n" = 2 ] && [ -n "$traced" ]; then
                rm -f "$trace"
                run "$name -n $n" 0 "$MPIEXEC" -n "$n" "$bin" --trace "$trace"
                one_trace_check "${name#lessons/} -n 2" "$traced"
                traced=""
            else
                run "$name -n $n" 0 "$MPIEXEC" -n "$n" "$bin"
            fi
            why=$(code_named "${name#lessons/} -n $n")
            [ -z "$why" ] || unnamed="$unnamed; $why"
            [ "$name" != lessons/02_p2p ] || p2p_transports "02_p2p -n $n" "$n"
        done
        [ -z "$traced" ] || one_run_trace "${name#lessons/} -n 2" 2 "$traced" "$bin"
        [ "$name" != lessons/01_hello ] || hello_torchrun "$bin"
        [ "$name" != lessons/24_modes ] || modes_table "$bin"
        case $name in
        lessons/29_pipeline_schedules)
            one_run_trace "29_pipeline_schedules -n 3" 3 \
                "mode pp schedule interleaved virtual 2 " "$bin" --steps 2 ;;
        lessons/23_dp_threads)
            one_run_trace "23_dp_threads -n 2" 2 "mode ddp " "$bin" --steps 3 --threads 2
            one_run_trace "23_dp_threads -n 1" 1 "mode dp-threads threads 2 gil 0.3 " \
                "$bin" --steps 3 --threads 2 ;;
        lessons/24_modes)
            one_run_trace "24_modes -n 2" 2 "mode ddp " "$bin" --steps 2
            one_run_trace "24_modes -n 2 --trace-mode tp" 2 "mode tp tp 2 " "$bin" \
                --steps 2 --trace-mode tp
            run "24_modes --trace-mode bogus -n 2" 2 "$MPIEXEC" -n 2 "$bin" --trace-mode bogus ;;
        esac
        if [ "$name" = lessons/02_p2p ]; then
            run "$name -n 3 (DT_P2P=staging)" 0 env DT_P2P=staging "$MPIEXEC" -n 3 "$bin"
            p2p_transports "02_p2p -n 3 (DT_P2P=staging)" 3 staging
        fi
        run "$name --help" 0 "$MPIEXEC" -n 1 "$bin" --help
        if [ "$(grep -c . "$log")" -lt 2 ]; then
            report "$name --help prints a usage text" 0 \
                "it printed $(grep -c . "$log") lines"
        fi
        if ! want 8; then              # section 8 runs these and more, at 1 and 3 ranks
            run "$name --bogus" 2 "$MPIEXEC" -n 1 "$bin" --bogus
            run "$name --bogus -n 2" 2 "$MPIEXEC" -n 2 "$bin" --bogus
        fi
    done
    : >"$log"
    if [ ${#lessons[@]} -gt 0 ]; then
        [ -z "$unnamed" ] && report "every lesson ends naming the code it teaches" 1 \
            "${#lessons[@]} lessons, each path and function found" ||
            report "every lesson ends naming the code it teaches" 0 "${unnamed#; }"
    fi
}
want 3 && timed 3 lesson_tests

# ==== 4. dttrace on a lesson's trace ====
# dttrace_copies: its count of dt_memcpy's copies between host and GPU (lib/trace.h:
# d2h and h2d of coll memcpy, by phase), on a hand-written training trace of 2 ranks
# and 3 steps. In steps 2..3 (from step 2's mark to the last train event of step 3, rank
# by rank): rank 0's batch, number and tensor, rank 1's batch and its thread 1's number.
# Outside: the weights up before step 1 and back after step 3, step 1's copies, one just
# before step 2's mark; and never counted, the staging copies (coll allreduce_ring).
# Without step marks, the first line alone; without such copies, neither line.
dttrace_copies() {
    local f=$tmp/copies.trace want got rc
    cat >"$f" <<'EOF_TRACE'
# dtlab-trace 3
# ranks 2
# program train
# train mode ddp bucket_kb 256 overlap on layers 2 hidden 8 batch 4 steps 3 ranks 2
# columns t0 t1 rank kind peer coll phase step chunk lo hi nbytes via thread
0.001 0.002 0 h2d -1 memcpy tensor -1 -1 0 0 1024 - 0
0.010 0.010 0 mark -1 train step 1 -1 0 0 0 - 0
0.011 0.012 0 h2d -1 memcpy batch -1 -1 0 0 256 - 0
0.015 0.016 0 compute -1 train optimizer 1 -1 0 0 0 - 0
0.019 0.0195 0 d2h -1 memcpy tensor -1 -1 0 0 512 - 0
0.020 0.020 0 mark -1 train step 2 -1 0 0 0 - 0
0.021 0.022 0 h2d -1 memcpy batch -1 -1 0 0 256 - 0
0.022 0.023 0 d2h -1 memcpy number -1 -1 0 0 4 - 0
0.023 0.024 0 d2h -1 allreduce_ring reduce-scatter 0 1 0 64 256 - 0
0.024 0.025 0 send 1 allreduce_ring reduce-scatter 0 1 0 64 256 staging 0
0.025 0.026 0 compute -1 train optimizer 2 -1 0 0 0 - 0
0.030 0.030 0 mark -1 train step 3 -1 0 0 0 - 0
0.031 0.032 0 h2d -1 memcpy batch -1 -1 0 0 256 - 0
0.032 0.033 0 d2h -1 memcpy tensor -1 -1 0 0 1024 - 0
0.035 0.036 0 compute -1 train optimizer 3 -1 0 0 0 - 0
0.040 0.041 0 d2h -1 memcpy tensor -1 -1 0 0 1024 - 0
0.010 0.010 1 mark -1 train step 1 -1 0 0 0 - 0
0.020 0.020 1 mark -1 train step 2 -1 0 0 0 - 0
0.021 0.022 1 h2d -1 memcpy batch -1 -1 0 0 256 - 0
0.024 0.025 1 recv 0 allreduce_ring reduce-scatter 0 1 0 64 256 staging 0
0.025 0.026 1 h2d -1 allreduce_ring reduce-scatter 0 1 0 64 256 - 0
0.030 0.030 1 mark -1 train step 3 -1 0 0 0 - 0
0.033 0.034 1 compute -1 train backward 3 0 0 1 0 - 0
0.0335 0.0336 1 d2h -1 memcpy number -1 -1 0 0 4 - 1
0.050 0.051 1 h2d -1 memcpy tensor -1 -1 0 0 1024 - 0
EOF_TRACE
    # copies_lines NAME TRACE WANT PASSED: dttrace on TRACE prints WANT as its host<->GPU
    # lines (the first, and the steps' line where there is one)
    copies_lines() {
        ${limit[@]+"${limit[@]}"} "$dttrace" "$2" >"$log" 2>&1 </dev/null
        local rc=$? got
        got=$(grep -A1 '^host<->GPU copies: ' "$log")
        if [ "$rc" = 0 ] && [ "$got" = "$3" ]; then
            report "dttrace: host<->GPU copies, $1" 1 "$4"
        else
            report "dttrace: host<->GPU copies, $1" 0 "$(status_words "$rc"), want: $3"
        fi
    }
    want="host<->GPU copies: tensor 5 (4.5 KiB), batch 4 (1 KiB), number 2 (8 B)
  in steps 2..3: tensor 1 (1 KiB), batch 3 (768 B), number 2 (8 B)"
    copies_lines "in steps" "$f" "$want" "tensor 5, 1 of them in steps 2..3"
    grep -v ' mark -1 train step ' "$f" >"$tmp/no-steps.trace"
    copies_lines "no steps" "$tmp/no-steps.trace" "${want%%$'\n'*}" "the first line alone"
    grep -v ' memcpy ' "$f" >"$tmp/no-copies.trace"
    ${limit[@]+"${limit[@]}"} "$dttrace" "$tmp/no-copies.trace" >"$log" 2>&1 </dev/null
    rc=$?
    if [ "$rc" = 0 ] && grep -q '^bytes sent by transport' "$log" &&
       ! grep -q '^host<->GPU\|^  in step' "$log"; then
        report "dttrace: no host<->GPU copies, no line" 1 "staging copies alone"
    else
        report "dttrace: no host<->GPU copies, no line" 0 \
            "$(status_words "$rc"), want a summary without host<->GPU lines"
    fi
}
dttrace_tests() {
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
        run "$(basename "$writer") --trace (4 ranks)" 0 "$MPIEXEC" -n 4 "$writer" \
            --trace "$trace"
        if [ -s "$trace" ] && head -n 1 "$trace" | grep -q '^# dtlab-trace '; then
            report "trace file written" 1 "$(grep -vc '^#' "$trace") events"
            # The ranks' clocks agree: every message is received no earlier than it
            # began to be sent. Pairs the k-th send from a to b with the k-th receive
            # by b from a (MPI keeps that order); columns: t0 t1 rank kind peer ...
            bad=$(awk '!/^#/ && $4 == "send" { s[$3 " " $5, ns[$3 " " $5]++] = $1 }
                       !/^#/ && $4 == "recv" { r[$5 " " $3, nr[$5 " " $3]++] = $2 }
                       END { bad = 0; pairs = 0
                             for (k in ns) for (i = 0; i < ns[k]; i++) {
                                 if (!((k, i) in r)) { bad++; continue }
                                 pairs++
                                 if (r[k, i] + 1e-6 < s[k, i]) bad++ }
                             print bad, pairs }' "$trace")
            if [ "${bad%% *}" = 0 ] && [ "${bad#* }" -gt 0 ]; then
                report "trace clocks agree (recv ends after send begins)" 1 \
                    "${bad#* } messages"
            else
                report "trace clocks agree (recv ends after send begins)" 0 \
                    "bad and total send/recv pairs: $bad"
            fi
            run "dttrace FILE" 0 ${limit[@]+"${limit[@]}"} "$dttrace" "$trace"
            run "dttrace --chrome OUT FILE" 0 ${limit[@]+"${limit[@]}"} "$dttrace" \
                --chrome "$tmp/lesson.json" "$trace"
            : >"$log"
            if [ -s "$tmp/lesson.json" ] &&
               grep -q '"traceEvents"\|^\[' "$tmp/lesson.json"; then
                report "dttrace Chrome JSON" 1 "$(wc -c <"$tmp/lesson.json") bytes"
            else
                report "dttrace Chrome JSON" 0 "missing, empty or not trace JSON"
            fi
        else
            : >"$log"
            report "trace file written" 0 "no trace, or no '# dtlab-trace' header"
        fi
        # bad input: a usage error, and a missing or garbled file, which is bad input
        # too (exit 2, as in dtviz): one "dttrace:" sentence, then the Try line
        run "dttrace --bogus" 2 ${limit[@]+"${limit[@]}"} "$dttrace" --bogus
        printf '# dtlab-trace 1\nthis is not an event\n' >"$tmp/garbled.trace"
        for f in "$tmp/no-such.trace" "$tmp/garbled.trace"; do
            ${limit[@]+"${limit[@]}"} "$dttrace" "$f" >/dev/null 2>"$log" </dev/null
            rc=$?
            name="dttrace on a $(basename "$f" .trace) file"
            if [ "$rc" = 2 ] && [ "$(grep -c . "$log")" = 2 ] && grep -q '^dttrace: ' "$log" &&
               [ "$(tail -n 1 "$log")" = "Try 'dttrace --help' for usage." ]; then
                report "$name" 1 "exit 2, $(head -n 1 "$log" | cut -c1-60)"
            else
                report "$name" 0 "$(status_words "$rc"), want exit 2, a sentence and the Try line"
            fi
        done
    fi
    [ ! -x "$dttrace" ] || dttrace_copies
}
want 4 && timed 4 dttrace_tests

# ==== 5. the training driver ====
# build/train in every mode at the rank counts from 1 to 4 it can use (exit 0, and a
# "step 1 loss" line); --help; impossible combinations, each of which must stop every
# rank soon with status 2 and a message on stderr; a traced run whose trace holds the
# compute events (forward, backward) beside the sends and receives; the weights of a
# ddp run and of dp-threads runs (1, 2, 5 and 7 threads on a batch of 24, and under the
# lock), dumped, against a serial run's; a dp-threads trace through dttrace and dtviz; and
# the GPT (--model gpt): a small one serially (its verdict and sample), in ddp and tp to
# its weights (tests/mpi_gpt.c holds every mode to serial's), and the README's command
# below the unigram entropy.
train_tests() {
    local train=$BUILD/train
    if [ ! -x "$train" ]; then
        missing train "$train"
        return
    fi
    local small=(--steps 3 --batch 24 --hidden 24 --layers 4 --examples 200)
    local mode n
    # train_ok NAME N ARGS...: exit 0 and a first step line
    train_ok() {
        local name=$1 n=$2 before=$passed
        shift 2
        run "$name" 0 "$MPIEXEC" -n "$n" "$train" "$@"
        if [ "$passed" -gt "$before" ] && ! grep -q '^step 1 loss [0-9]' "$log"; then
            report "$name prints 'step 1 loss'" 0 "no such line"
        fi
    }
    for mode in serial dp ddp fsdp tp pp hybrid; do
        for n in 1 2 3 4; do
            case $mode in serial) [ "$n" = 1 ] || continue ;; esac
            train_ok "train --mode $mode -n $n" "$n" --mode "$mode" "${small[@]}"
        done
    done
    train_ok "train dp --dedicated-server -n 3" 3 --mode dp --dedicated-server \
        "${small[@]}"
    train_ok "train dp --async 1 -n 3" 3 --mode dp --async 1 "${small[@]}"
    train_ok "train dp-threads --threads 3 -n 1" 1 --mode dp-threads --threads 3 "${small[@]}"
    train_ok "train ddp --accum 2 --no-overlap -n 2" 2 --mode ddp --accum 2 --no-overlap \
        --bucket-kb 1 "${small[@]}"
    train_ok "train fsdp --zero 1 --optim adam -n 3" 3 --mode fsdp --zero 1 --optim adam \
        --lr 0.01 "${small[@]}"
    train_ok "train tp --tp-style allgather -n 2" 2 --mode tp --tp-style allgather "${small[@]}"
    train_ok "train pp --schedule gpipe --micro 2 -n 3" 3 --mode pp --schedule gpipe \
        --micro 2 "${small[@]}"
    train_ok "train hybrid --dp 2 --tp 2 -n 4" 4 --mode hybrid --dp 2 --tp 2 --pp 1 "${small[@]}"
    train_ok "train hybrid --tp 2 --pp 2 -n 4" 4 --mode hybrid --tp 2 --pp 2 "${small[@]}"
    train_ok "train ddp --precision fp16 -n 2" 2 --mode ddp --precision fp16 "${small[@]}"
    run "train --help" 0 "$MPIEXEC" -n 1 "$train" --help
    if [ "$(grep -c . "$log")" -lt 2 ]; then
        report "train --help prints a usage text" 0 "it printed $(grep -c . "$log") lines"
    fi

    # train_bad NAME N ARGS...: status 2 on every rank, a message on stderr, soon
    train_bad() {
        local name="train refuses $1 -n $2" n=$2 t0 rc took
        shift 2
        t0=$(now)
        MPIEXEC_TIMEOUT=30 "$MPIEXEC" -n "$n" "$train" "$@" >"$log" 2>"$tmp/stderr" </dev/null
        rc=$?
        took=$(since "$t0")
        cat "$tmp/stderr" >>"$log"
        if grep -q 'APPLICATION TIMED OUT' "$log"; then
            report "$name" 0 "timed out after 30 s: a rank was left waiting  [$took]"
        elif [ "$rc" != 2 ]; then
            report "$name" 0 "$(status_words "$rc"), want exit 2  [$took]"
        elif ! grep -q . "$tmp/stderr"; then
            report "$name" 0 "exit 2 but nothing on stderr  [$took]"
        else
            local msg
            msg=$(grep -v '^usage:' "$tmp/stderr" | grep -v '; running on the CPU$' | head -n 1)
            [ ${#msg} -le 50 ] || msg="${msg:0:47}..."
            report "$name" 1 "exit 2: $msg  [$took]"
        fi
    }
    train_bad "tp --hidden 25" 2 --mode tp --hidden 25 --steps 2
    train_bad "pp --layers 2" 3 --mode pp --layers 2 --steps 2
    train_bad "D*T*P = 4" 3 --mode hybrid --dp 2 --tp 1 --pp 2 --steps 2
    train_bad "ddp --batch 25" 2 --mode ddp --batch 25 --steps 2
    train_bad "--zero 4" 2 --mode fsdp --zero 4
    train_bad "--bogus" 2 --bogus
    train_bad "--steps 3x" 2 --mode ddp --steps 3x
    train_bad "--lr -1" 2 --mode ddp --lr -1
    train_bad "--mode warp" 2 --mode warp
    train_bad "ddp --zero 2" 2 --mode ddp --zero 2
    train_bad "dp-threads" 2 --mode dp-threads --threads 2
    train_bad "a stray argument" 2 --mode ddp extra
    train_bad "--data missing" 2 --mode ddp --data "$tmp/no-such-dir"

    # MNIST-format IDX files the test writes: 60 images of 4x4 pixels, labels 0..2
    local idx=$tmp/idx hex="" lab="" i j
    mkdir -p "$idx"
    for ((i = 0; i < 60; i++)); do
        lab+=$(printf '\\x%02x' $((i % 3)))
        for ((j = 0; j < 16; j++)); do
            hex+=$(printf '\\x%02x' $(((i % 3) * 80 + j * 5 + i * 7 % 13)))
        done
    done
    printf '\x00\x00\x08\x03\x00\x00\x00\x3c\x00\x00\x00\x04\x00\x00\x00\x04'"$hex" \
        >"$idx/train-images-idx3-ubyte"
    printf '\x00\x00\x08\x01\x00\x00\x00\x3c'"$lab" >"$idx/train-labels-idx1-ubyte"
    run "train ddp --data (IDX files, 2 ranks)" 0 "$MPIEXEC" -n 2 "$train" --mode ddp \
        --data "$idx" --steps 3 --batch 12 --hidden 8 --layers 2
    grep -q '^step 3 loss' "$log" ||
        report "train --data prints its steps" 0 "no 'step 3 loss' line"
    head -c 100 "$idx/train-images-idx3-ubyte" >"$idx/cut" &&
        mv "$idx/cut" "$idx/train-images-idx3-ubyte"
    train_bad "--data with a truncated file" 2 --mode ddp --data "$idx"

    # the trace: compute events (forward, backward) beside the sends and receives
    local trace=$tmp/train.trace
    run "train ddp --trace (2 ranks)" 0 "$MPIEXEC" -n 2 "$train" --mode ddp \
        "${small[@]}" --trace "$trace"
    : >"$log"
    if [ -s "$trace" ] && head -n 1 "$trace" | grep -q '^# dtlab-trace '; then
        # columns: t0 t1 rank kind peer coll phase ...
        local counts
        counts=$(awk '!/^#/ { k[$4 == "compute" ? $4 " " $7 : $4]++ }
                      END { printf "%d %d %d %d", k["compute forward"],
                            k["compute backward"], k["send"], k["recv"] }' "$trace")
        set -- $counts
        if [ "$1" -gt 0 ] && [ "$2" -gt 0 ] && [ "$3" -gt 0 ] && [ "$4" -gt 0 ]; then
            report "train trace: compute and communication" 1 \
                "forward $1, backward $2, send $3, recv $4"
        else
            report "train trace: compute and communication" 0 \
                "forward $1, backward $2, send $3, recv $4: want all above 0"
        fi
        if [ -x "$BUILD/dttrace" ]; then
            run "dttrace on the train trace" 0 ${limit[@]+"${limit[@]}"} "$BUILD/dttrace" \
                "$trace"
        fi
    else
        report "train trace written" 0 "no trace, or no '# dtlab-trace' header"
    fi

    # ddp's and dp-threads' weights against serial's, through --dump (raw float32)
    run "train serial --dump" 0 "$MPIEXEC" -n 1 "$train" --mode serial "${small[@]}" \
        --quiet --dump "$tmp/serial.f32"
    # same_as_serial NAME N ARGS...: train ARGS and $shape at N ranks, dumped, against
    # the serial run's $ref, each weight w within $tol ("ABS REL": ABS + REL |w|). Here
    # the MLP's small shape, its serial run and "1e-5 1e-4"; the GPT's further down
    local shape=("${small[@]}") ref=$tmp/serial.f32 tol="1e-5 1e-4"
    same_as_serial() {
        local name=$1 n=$2 cmp
        shift 2
        rm -f "$tmp/run.f32"
        run "train $name --dump" 0 "$MPIEXEC" -n "$n" "$train" "$@" "${shape[@]}" --quiet \
            --dump "$tmp/run.f32"
        : >"$log"
        if [ ! -s "$ref" ] || [ ! -s "$tmp/run.f32" ]; then
            report "train $name --dump wrote the weights" 0 "a dump file is missing or empty"
            return
        fi
        cmp=$(paste <(od -An -v -f -w4 "$ref") <(od -An -v -f -w4 "$tmp/run.f32") |
              awk -v atol="${tol% *}" -v rtol="${tol#* }" \
                  '{ d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1
                     if (d > m) m = d; if (d > atol + rtol * a || NF != 2) bad++ }
                   END { printf "%d %d %g", NR, bad, m }')
        set -- $cmp
        if [ "$2" = 0 ] && [ "$1" -gt 0 ]; then
            report "train $name weights = serial's" 1 "$1 weights, largest difference $3"
        else
            report "train $name weights = serial's" 0 "$2 of $1 weights differ (largest $3)"
        fi
    }
    same_as_serial "ddp -n 3" 3 --mode ddp
    # DataParallel: 1 thread, 2, and 5 and 7, which do not divide the batch of 24; the lock
    local t
    for t in 1 2 5 7; do
        same_as_serial "dp-threads --threads $t" 1 --mode dp-threads --threads "$t"
    done
    same_as_serial "dp-threads --threads 3 --gil 0.4" 1 --mode dp-threads --threads 3 \
        --gil 0.4

    # a dp-threads trace: every replica's forward and backward (micro = the replica),
    # the master's copies; dttrace summarizes it, dtviz draws it
    trace=$tmp/dpt.trace
    run "train dp-threads --threads 3 --gil 0.3 --trace" 0 "$MPIEXEC" -n 1 "$train" \
        --mode dp-threads --threads 3 --gil 0.3 "${small[@]}" --quiet --trace "$trace"
    : >"$log"
    local seen
    seen=$(awk '!/^#/ && $6 == "dp-threads" { c[$7]++ }
                END { printf "%d %d %d", c["replicate"], c["reduce"], c["gather"] }' "$trace")
    set -- $seen
    if [ "$1" -gt 0 ] && [ "$2" -gt 0 ] && [ "$3" -gt 0 ] &&
       grep -q '^# train mode dp-threads threads 3 gil 0.3 ' "$trace"; then
        report "train dp-threads trace: the master's copies" 1 \
            "replicate $1, reduce $2, gather $3"
    else
        report "train dp-threads trace: the master's copies" 0 \
            "replicate $1, reduce $2, gather $3, or no '# train mode dp-threads' line"
    fi
    if [ -x "$BUILD/dttrace" ]; then
        run "dttrace on the dp-threads trace" 0 ${limit[@]+"${limit[@]}"} "$BUILD/dttrace" \
            "$trace"
    fi
    if [ -x "$BUILD/dtviz" ]; then
        rm -f "$tmp/dpt.png"
        run "dtviz --png on the dp-threads trace" 0 env SDL_VIDEODRIVER=dummy \
            ${limit[@]+"${limit[@]}"} "$BUILD/dtviz" --png "$tmp/dpt.png" "$trace"
        [ -s "$tmp/dpt.png" ] || report "dtviz drew the dp-threads trace" 0 "no PNG"
    fi

    # ---- the GPT (--model gpt, lib/nn/gpt.h): a small one serially, its loss, verdict
    # and sample; ddp and tp, dumped, to serial's weights; the README's command learning
    # from context (its last loss below the text's unigram entropy)
    local gpt=(--model gpt --steps 20 --embed 32 --seq 32 --layers 1 --batch 12) gpt_why
    local verdict='^last loss [0-9.]+ nats = [0-9.]+ bits a byte: '
    rm -f "$tmp/gpt-serial.f32"
    train_ok "train --model gpt -n 1" 1 "${gpt[@]}" --dump "$tmp/gpt-serial.f32"
    gpt_why=""
    grep -Eq "$verdict(not )?below the unigram" "$log" ||
        gpt_why="; no verdict line 'last loss ... nats'"
    grep -q '^sampled at temperature 0.8 after "' "$log" ||
        gpt_why="$gpt_why; no 'sampled at temperature' line"
    if [ -z "$gpt_why" ]; then
        report "train --model gpt: the verdict and a sample" 1 \
            "$(grep -Eo "$verdict[^(]*[^ (]" "$log")"
    else
        report "train --model gpt: the verdict and a sample" 0 "${gpt_why#; }"
    fi
    # Adam divides each step by the gradient's size: where one is near zero (attention's
    # queries and keys, early on) another order of the same sums moves a weight by 1e-5
    # in a few steps, and by 1e-3 in 30 for some seeds (serial with DT_BLAS=0 differs from
    # serial as much): 20 steps, within 1e-4 + 1e-3 |w| (at most 0.3 of it measured over
    # 12 seeds; tests/mpi_gpt.c holds every mode to 1e-5 + 1e-4 |w| on a smaller shape)
    shape=("${gpt[@]}") ref=$tmp/gpt-serial.f32 tol="1e-4 1e-3"
    same_as_serial "--model gpt ddp -n 3" 3 --mode ddp
    same_as_serial "--model gpt tp -n 2" 2 --mode tp
    run "train --model gpt --mode tp -n 2 (README)" 0 "$MPIEXEC" -n 2 "$train" --model gpt \
        --mode tp
    if grep -Eq "${verdict}below the unigram" "$log"; then
        report "train --model gpt: below the unigram entropy" 1 \
            "$(grep -Eo "$verdict[^(]*[^ (]" "$log")"
    else
        report "train --model gpt: below the unigram entropy" 0 \
            "$(grep -Eo "$verdict[^(]*[^ (]" "$log" || echo "no verdict line")"
    fi

    # --recompute full and selective: the same weights as keeping every activation, byte
    # for byte (backward sees the same numbers), in serial, in tp (the forward's sums run
    # again; with --sp its gathers, 16 and 15 positions), across pipeline stages and with
    # fsdp's units gathered again (lesson 26
    # holds the activations each keeps to their count)
    gpt_recompute() {
        local name="train --model gpt --recompute -n $2 $1" n=$2 r why=""
        shift 2
        for r in none full ${rc_selective-selective}; do
            rm -f "$tmp/rc-$r.f32"
            MPIEXEC_TIMEOUT=60 "$MPIEXEC" -n "$n" "$train" "${gpt[@]}" --layers 2 --steps 4 \
                "$@" --recompute "$r" --quiet --dump "$tmp/rc-$r.f32" >"$log" 2>&1 </dev/null ||
                why="$why; --recompute $r: $(status_words $?)"
        done
        cmp -s "$tmp/rc-none.f32" "$tmp/rc-full.f32" || why="$why; full's weights differ"
        [ -z "${rc_selective-selective}" ] || cmp -s "$tmp/rc-none.f32" \
            "$tmp/rc-selective.f32" || why="$why; selective's weights differ"
        if [ -z "$why" ]; then
            report "$name" 1 "weights byte-equal"
        else
            report "$name" 0 "${why#; }"
        fi
    }
    gpt_recompute serial 1
    gpt_recompute "--mode tp" 2 --mode tp --heads 2
    gpt_recompute "--mode tp --sp" 2 --mode tp --sp --heads 2 --seq 31
    rc_selective="" gpt_recompute "--mode hybrid --cp 2 (full)" 2 --mode hybrid --cp 2
    gpt_recompute "--mode pp" 3 --mode pp --micro 2

    # today's pipeline schedules move when each micro-batch's forward and backward run,
    # never the order its gradients add up in: the weights byte-equal to 1F1B's (the
    # MLP's interleaved at 3 stages and 5 micro-batches, zb-h1 in fp16 and beside dp's
    # buckets, which its W's fill; the GPT's interleaved with 3 chunks a stage, its zb-h1
    # alone and with tp's sums, sp's gathers and fp16)
    pp_same() {   # pp_same N "SCHEDULE ARGS" ARGS...
        local n=$1 sched=$2 why=""
        local name="train $sched -n $n${3:+ $3 $4}: weights byte-equal to 1f1b's"
        shift 2
        MPIEXEC_TIMEOUT=60 "$MPIEXEC" -n "$n" "$train" "$@" --quiet --schedule 1f1b \
            --dump "$tmp/pp-1f1b.f32" >"$log" 2>&1 </dev/null || why="1f1b: $(status_words $?)"
        MPIEXEC_TIMEOUT=60 "$MPIEXEC" -n "$n" "$train" "$@" --quiet $sched \
            --dump "$tmp/pp-new.f32" >>"$log" 2>&1 </dev/null || why="$why; $(status_words $?)"
        [ -n "$why" ] || cmp -s "$tmp/pp-1f1b.f32" "$tmp/pp-new.f32" || why="they differ"
        if [ -z "$why" ]; then
            report "$name" 1 "byte-equal"
        else
            report "$name" 0 "${why#; }"
        fi
    }
    pp_same 3 "--schedule interleaved --virtual 2" --mode pp --layers 6 --micro 5 \
        --batch 30 --steps 3 --hidden 24
    pp_same 3 "--schedule zb-h1" --mode pp --layers 5 --micro 4 --batch 24 --steps 3 \
        --hidden 24 --precision fp16
    pp_same 4 "--schedule zb-h1" --mode hybrid --dp 2 --pp 2 --layers 4 --micro 3 \
        --batch 36 --steps 3 --hidden 24 --bucket-kb 1
    pp_same 2 "--schedule interleaved --virtual 3" "${gpt[@]}" --mode pp --layers 4 \
        --micro 2 --steps 2
    pp_same 3 "--schedule zb-h1" "${gpt[@]}" --mode pp --layers 3 --micro 4 --steps 2
    pp_same 4 "--schedule zb-h1" "${gpt[@]}" --mode hybrid --tp 2 --pp 2 --heads 2 --sp \
        --micro 2 --steps 2 --precision fp16
    gpt_recompute "--mode fsdp --zero 3" 2 --mode fsdp --zero 3

    # ---- the CPU's matrix products: sgemm or the loops (lib/nn/blas.c), stepbench
    local sb=$BUILD/bench/stepbench out_b out_l why
    if [ -x "$sb" ]; then
        # the same step with sgemm and with the loops: the loss of the first step (before
        # any update) agrees to the printed digits, and both learn
        local small=(--in 37 --hidden 45 --out 7 --layers 3 --batch 33 --seconds 0.05
                     --max-steps 40 --act gelu --optim adam)
        out_b=$(timeout 60 env DT_BLAS=1 "$sb" "${small[@]}" --threads 2 2>&1)
        out_l=$(timeout 60 env DT_BLAS=0 "$sb" "${small[@]}" 2>&1)
        printf '%s\n%s\n' "$out_b" "$out_l" >"$log"
        why=""
        [[ $out_b == *" threads 2 blas adam gelu: median "* ]] || why="$why; no sgemm line"
        [[ $out_l == *" threads 1 loops adam gelu: median "* ]] || why="$why; no loops line"
        local lb ll
        lb=$(sed -n 's/.*, loss \([0-9.]*\) -> \([0-9.]*\)$/\1 \2/p' <<<"$out_b")
        ll=$(sed -n 's/.*, loss \([0-9.]*\) -> \([0-9.]*\)$/\1 \2/p' <<<"$out_l")
        [ -n "$lb" ] && [ "${lb% *}" = "${ll% *}" ] ||
            why="$why; first losses '${lb% *}' and '${ll% *}' differ"
        awk -v a="$lb" -v b="$ll" 'BEGIN { split(a, x, " "); split(b, y, " ");
            exit !(x[2] < x[1] && y[2] < y[1]) }' || why="$why; a loss did not go down"
        if [ -z "$why" ]; then
            report "stepbench: sgemm and the loops" 1 "first loss ${lb% *} both, both learn"
        else
            report "stepbench: sgemm and the loops" 0 "${why#; }"
        fi
        # without PyTorch the comparison says so and exits 0 (a skip, not a failure)
        out_b=$(timeout 60 python3 bench/step_vs_torch.py --stepbench "$sb" \
            --python "$tmp/no-such-python" 2>&1)
        rc=$?
        printf '%s\n' "$out_b" >"$log"
        if [ "$rc" = 0 ] && [[ $out_b == "step_vs_torch: skipped: "*"cannot import torch"* ]]
        then
            report "step_vs_torch.py without PyTorch: a skip" 1 "exit 0, says why"
        else
            report "step_vs_torch.py without PyTorch: a skip" 0 "$(status_words "$rc")"
        fi
    else
        missing stepbench "$sb"
    fi
    # ---- lib/nn's loops in three builds (DTI_NN_WIDE, lib/nn/nn_internal.h): baseline,
    # AVX2 and AVX-512, the widest this CPU has picked when the program loads. The same
    # bits from each: one GPT step here, the AVX-512 build, against the same step under
    # valgrind, whose CPU has AVX2 and not AVX-512; with the plain loops (DT_BLAS=0),
    # as OpenBLAS too picks its kernels by the CPU. (The baseline build makes the same
    # operations in the same order: bench/gpt_vs_torch.py's dumps were compared once.)
    local gs=$BUILD/bench/gptstep wide=(--layers 2 --heads 3 --embed 48 --seq 17 --batch 3)
    if [ ! -x "$gs" ]; then
        missing gptstep "$gs"
    elif [ -n "${SANITIZE:-}" ] || ! command -v valgrind >/dev/null 2>&1; then
        skip "lib/nn's AVX-512 and AVX2 builds: the same bits" \
            "needs valgrind and a build without SANITIZE"
    elif ! grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
        skip "lib/nn's AVX-512 and AVX2 builds: the same bits" \
            "this CPU has no AVX-512, so both runs would take the same build"
    else
        rm -rf "$tmp/wide" "$tmp/avx2"
        { timeout 60 env DT_BLAS=0 "$gs" "${wide[@]}" --dump "$tmp/wide" &&
          timeout 120 env DT_BLAS=0 valgrind -q --error-exitcode=99 "$gs" "${wide[@]}" \
              --dump "$tmp/avx2"; } >"$log" 2>&1 </dev/null
        rc=$?
        if [ "$rc" != 0 ]; then
            report "lib/nn's AVX-512 and AVX2 builds: the same bits" 0 "$(status_words "$rc")"
        elif cmp "$tmp/wide/grads.f32" "$tmp/avx2/grads.f32" >>"$log" 2>&1 &&
             cmp "$tmp/wide/loss.txt" "$tmp/avx2/loss.txt" >>"$log" 2>&1; then
            report "lib/nn's AVX-512 and AVX2 builds: the same bits" 1 \
                "a GPT step's loss and $(($(stat -c %s "$tmp/wide/grads.f32") / 4)) gradients"
        else
            report "lib/nn's AVX-512 and AVX2 builds: the same bits" 0 \
                "the gradients differ (was -ffp-contract=off dropped?)"
        fi
    fi
    # train says which products it uses, and how many threads a rank (cores / ranks)
    local cores
    cores=$(nproc)
    out_b=$(MPIEXEC_TIMEOUT=60 "$MPIEXEC" -n 2 "$train" --mode ddp --steps 2 2>&1 </dev/null)
    out_l=$(DT_BLAS=0 MPIEXEC_TIMEOUT=60 "$MPIEXEC" -n 1 "$train" --steps 2 2>&1 </dev/null)
    printf '%s\n%s\n' "$out_b" "$out_l" >"$log"
    local want_t=$((cores / 2 > 1 ? cores / 2 : 1))
    if [[ $out_b == *"matrix products: OpenBLAS sgemm, $want_t thread"*"$cores core"*"2 ranks on this host"* ]] &&
       [[ $out_l == *"matrix products: the plain loops (DT_BLAS=0)"* ]]; then
        report "train: the matrix products line" 1 "$want_t thread(s) a rank at 2 ranks on $cores cores"
    else
        report "train: the matrix products line" 0 "want $want_t thread(s) at 2 ranks, loops with DT_BLAS=0"
    fi
}
want 5 && timed 5 train_tests

# ==== 6. the viewer ====
viz_tests() {
    local dtviz=$BUILD/dtviz
    if [ ! -x "$dtviz" ]; then
        missing dtviz "$dtviz"
        return
    fi
    local viz=("${limit[@]+"${limit[@]}"}" "$dtviz")

    # traces written by the lessons (the model suite compares them with the built-in
    # schedules) and by the training driver (a timeline of compute and messages); each
    # run writes its own trace, so they run two at a time (job_bg), each said when it fails
    local traces=$tmp/traces lesson n args makers=() m rc
    mkdir -p "$traces"
    for lesson in 03_bcast 04_reduce 05_gather_scatter 06_allgather 07_reduce_scatter \
                  08_ring_allreduce 09_allreduce_compare 10_alltoall; do
        [ -x "$BUILD/lessons/$lesson" ] || { missing "$lesson" "$BUILD/lessons/$lesson"; continue; }
        args=()
        [ "$lesson" = 09_allreduce_compare ] && args=(--max-size 64 --iters 1)
        for n in 3 4 5; do
            job_bg "tr-$lesson-$n" "$MPIEXEC" -n "$n" "$BUILD/lessons/$lesson" \
                ${args[@]+"${args[@]}"} --trace "$traces/$lesson-$n.trace"
            makers+=("tr-$lesson-$n $lesson -n $n --trace (for the viewer)")
        done
    done
    # ring attention (lesson 27): its two traced passes, at 3 ranks, a short sequence
    if [ -x "$BUILD/lessons/27_ring_attention" ]; then
        job_bg tr-27 "$MPIEXEC" -n 3 "$BUILD/lessons/27_ring_attention" --seq 48 --reps 1 \
            --trace "$traces/27_ring_attention-3.trace"
        makers+=("tr-27 27_ring_attention -n 3 --trace (for the viewer)")
    else
        missing 27_ring_attention "$BUILD/lessons/27_ring_attention"
    fi
    local train=$BUILD/train small=(--steps 2 --batch 24 --hidden 24 --layers 4 --quiet)
    local ddp=$traces/train-ddp-3.trace pp=$traces/train-pp-4.trace
    job_bg tr-ddp "$MPIEXEC" -n 3 "$train" --mode ddp "${small[@]}" --trace "$ddp"
    makers+=("tr-ddp train ddp --trace (for the viewer)")
    job_bg tr-pp "$MPIEXEC" -n 4 "$train" --mode pp --micro 4 "${small[@]}" --trace "$pp"
    makers+=("tr-pp train pp --trace (for the viewer)")

    # the training timetable's traces: every mode of train, each run in a second or less
    # (2 steps of a small model), at 1 and odd rank counts where the mode allows, counts
    # that do not divide evenly (batch 21: 7 rows per rank, 4 or 5 rows per micro-batch)
    # and buckets small enough that ddp has several (and once micro-batches, --accum);
    # the GPT in the modes whose timetables it changes (its blocks' parts, fsdp's gathers
    # by block, tp's sums inside a part, a recomputed forward, pp's tied wte, experts).
    # Named MODE[-WHAT].trace, pp-SCHEDULE-M[-WHAT].trace or hybrid-ppP-SCHEDULE-M.trace:
    # the suite reads what train was given from the name.
    local tt=$tmp/timetable np name spec t0 ntt
    local tiny=(--steps 2 --hidden 16 --layers 4 --quiet)
    local gtiny=(--steps 2 --embed 16 --seq 8 --layers 2 --heads 2 --quiet) tsz
    mkdir -p "$tt"
    t0=$(now)
    while read -r np name spec; do
        [ "$name" != moe ] || "$train" --help 2>/dev/null | grep -q 'moe' || continue
        [[ $name != pp-interleaved* && $name != pp-zb-h1* ]] ||
            "$train" --help 2>/dev/null | grep -q 'zb-h1' || continue
        if [[ " $spec " == *" --model gpt "* ]]; then tsz=("${gtiny[@]}"); else tsz=("${tiny[@]}"); fi
        job_bg "tt-$name" "$MPIEXEC" -n "$np" "$train" "${tsz[@]}" $spec --trace "$tt/$name.trace"
        makers+=("tt-$name train $spec -n $np --trace (for the timetable)")
    done <<END
3 pp-gpipe-4 --mode pp --schedule gpipe --micro 4 --batch 20
3 pp-1f1b-5 --mode pp --schedule 1f1b --micro 5 --batch 20
2 pp-interleaved-5 --mode pp --schedule interleaved --virtual 2 --micro 5 --batch 20
3 pp-zb-h1-4 --mode pp --schedule zb-h1 --micro 4 --batch 20
3 ddp --mode ddp --bucket-kb 1 --batch 21
3 ddp-accum --mode ddp --bucket-kb 1 --accum 2 --batch 42
3 fsdp --mode fsdp --batch 21
1 fsdp-1 --mode fsdp --batch 21
3 fsdp-prefetch --mode fsdp --prefetch --batch 21
2 tp --mode tp --batch 21
4 hybrid --mode hybrid --tp 2 --batch 22
4 hybrid-pp2-1f1b-3 --mode hybrid --pp 2 --dp 2 --schedule 1f1b --micro 3 --batch 30
3 dp --mode dp --batch 21
3 moe --mode moe --batch 21
2 fsdp-gpt --model gpt --mode fsdp --batch 6
2 tp-gpt --model gpt --mode tp --recompute full --batch 6
3 tp-sp-gpt --model gpt --mode tp --sp --heads 3 --embed 18 --batch 6
2 hybrid-cp-gpt --model gpt --mode hybrid --cp 2 --batch 6
3 pp-1f1b-3-gpt --model gpt --mode pp --schedule 1f1b --micro 3 --batch 6
3 moe-gpt --model gpt --mode moe --batch 12
END
    wait
    for m in "${makers[@]}"; do
        rc=$(cat "$jobdir/${m%% *}.rc" 2>/dev/null)
        [ "$rc" = 0 ] && continue
        cp "$jobdir/${m%% *}.log" "$log" 2>/dev/null || : >"$log"
        report "${m#* }" 0 "$(status_words "${rc:-?}")"
    done
    ntt=$(ls "$tt" | grep -c '\.trace$')
    if [ -x "$BUILD/tests/viz_timetable" ]; then
        run "viz_timetable (built-ins, $ntt traces of train, pixels)" 0 \
            env DTVIZ_TT_TRACES="$tt" SDL_VIDEODRIVER=dummy ${limit[@]+"${limit[@]}"} \
            "$BUILD/tests/viz_timetable"
        n=$(grep -c '^viz_timetable: .*\.trace: ' "$log")
        if [ "$n" = "$ntt" ] && [ "$n" -gt 0 ]; then
            report "viz_timetable checked every trace of train" 1 "$n traces  [$(since "$t0")]"
        else
            : >"$log"               # (the suite's failures are above)
            report "viz_timetable checked every trace of train" 0 "$n of $ntt traces passed"
        fi
    else
        missing viz_timetable "$BUILD/tests/viz_timetable"
    fi
    # dtviz draws each of them, its last step as a PNG; a step past the last is refused
    local ok=1 detail="" f
    for f in "$tt"/*.trace; do
        rm -f "$tmp/tt.png"
        "${viz[@]}" --png "$tmp/tt.png" --view timetable --train-step 2 "$f" >"$log" 2>&1 </dev/null
        rc=$?
        if [ "$rc" != 0 ] || [ ! -s "$tmp/tt.png" ]; then
            ok=0 detail="$(basename "$f") --train-step 2: $(status_words $rc) or no PNG"
            break
        fi
        "${viz[@]}" --png "$tmp/tt.png" --train-step 3 "$f" >"$log" 2>&1 </dev/null
        rc=$?
        if [ "$rc" != 2 ] || ! grep -q '^dtviz: ' "$log"; then
            ok=0 detail="$(basename "$f") --train-step 3: $(status_words $rc), not a usage error"
            break
        fi
    done
    report "dtviz --view timetable --png, every mode" "$ok" "${detail:-$ntt traces: step 2 drawn, step 3 refused}"

    local suite
    for suite in viz_model viz_app; do
        if [ -x "$BUILD/tests/$suite" ]; then
            run "$suite" 0 env DTVIZ_TRACES="$traces" SDL_VIDEODRIVER=dummy \
                ${limit[@]+"${limit[@]}"} "$BUILD/tests/$suite"
        else
            missing "$suite" "$BUILD/tests/$suite"
        fi
    done

    # every algorithm, headless, at 1 to 16 ranks: a PNG of the first and the last
    # position (which dtviz names when it writes the first), and one past the last refused;
    # two algorithms at a time (job_bg), each with its own files
    local algo png=$tmp/v.png
    is_png() { [ "$(head -c 8 "$1" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; }
    # algo_positions ALGO: prints "ok" or why not; its runs' output is in $jobdir/algo-ALGO.log
    algo_positions() {
        local algo=$1 n rc last png=$tmp/v-$1.png log=$tmp/v-$1.out
        for n in 1 2 3 4 7 16; do
            rm -f "$png"
            "${viz[@]}" --algo "$algo" --ranks "$n" --count 1000 --png "$png" >"$log" 2>&1 </dev/null
            rc=$?
            cat "$log"
            last=$(sed -n 's/.*position 0 of 0\.\.\([0-9]*\).*/\1/p' "$log")
            if [ "$rc" != 0 ] || ! is_png "$png" || [ -z "$last" ]; then
                echo "--ranks $n: $(status_words $rc), no PNG or no 'position 0 of 0..K'"
                return
            fi
            rm -f "$png"
            "${viz[@]}" --algo "$algo" --ranks "$n" --count 1000 --png "$png" --step "$last" \
                >"$log" 2>&1 </dev/null
            rc=$?
            cat "$log"
            if [ "$rc" != 0 ] || ! is_png "$png"; then
                echo "--ranks $n --step $last: $(status_words $rc) or no PNG"
                return
            fi
            "${viz[@]}" --algo "$algo" --ranks "$n" --count 1000 --png "$png" \
                --step $((last + 1)) >"$log" 2>&1 </dev/null
            rc=$?
            cat "$log"
            if [ "$rc" != 2 ] || ! grep -q '^dtviz: ' "$log"; then
                echo "--ranks $n --step $((last + 1)): $(status_words $rc), not a usage error"
                return
            fi
        done
        echo ok
    }
    local algos=(ring-allreduce reduce-scatter allgather naive-allreduce tree-bcast
                 tree-reduce rd-allreduce alltoall tree-gather tree-scatter ring-attention
                 ring-attention-zigzag)
    for algo in "${algos[@]}"; do
        job_bg "algo-$algo" algo_positions "$algo"
    done
    wait
    for algo in "${algos[@]}"; do
        cp "$jobdir/algo-$algo.log" "$log"
        if [ "$(tail -n 1 "$log")" = ok ]; then
            report "dtviz --algo $algo --png" 1 "1, 2, 3, 4, 7, 16 ranks: first and last step; one past refused"
        else
            report "dtviz --algo $algo --png" 0 "$(tail -n 1 "$log")"
        fi
    done

    # the built-in interleaved and zb-h1 timetables, headless; --virtual off interleaved
    # (or a shape it does not run) is a usage error
    rm -f "$png" "$tmp/zb.png"
    run "dtviz --algo interleaved --virtual 3 --png" 0 "${viz[@]}" --algo interleaved \
        --virtual 3 --stages 3 --micro 5 --png "$png"
    run "dtviz --algo zb-h1 --png" 0 "${viz[@]}" --algo zb-h1 --stages 5 --micro 3 \
        --png "$tmp/zb.png"
    is_png "$png" && is_png "$tmp/zb.png" ||
        report "dtviz --algo interleaved, zb-h1 wrote PNGs" 0 "no PNG"

    # traces: a lesson's and a training run's, as PNG, every step as frames, and as JSON
    local f t
    for t in "$traces/08_ring_allreduce-4.trace" "$ddp" "$pp"; do
        rm -f "$png"
        run "dtviz --png $(basename "$t")" 0 "${viz[@]}" --png "$png" --step 1 "$t"
        is_png "$png" || report "dtviz --png $(basename "$t") wrote a PNG" 0 "no PNG"
    done
    # ring attention's trace: the zig-zag pass as a picture, and its timetable
    t=$traces/27_ring_attention-3.trace
    if [ -s "$t" ]; then
        rm -f "$png"
        run "dtviz --png $(basename "$t") --step 5" 0 "${viz[@]}" --png "$png" --step 5 "$t"
        is_png "$png" || report "dtviz --png $(basename "$t") wrote a PNG" 0 "no PNG"
        rm -f "$png"
        run "dtviz --png $(basename "$t") --view timetable" 0 "${viz[@]}" --png "$png" \
            --view timetable --train-step 1 "$t"
        is_png "$png" || report "dtviz --view timetable $(basename "$t") wrote a PNG" 0 "no PNG"
    fi
    run "dtviz --frames DIR (ring, 4 ranks)" 0 "${viz[@]}" --frames "$tmp/frames" \
        "$traces/08_ring_allreduce-4.trace"
    n=$(ls "$tmp/frames" 2>/dev/null | grep -c '^frame-[0-9]*\.png$')
    # a ring allreduce at 4 ranks is 2(4-1) = 6 steps: 7 positions
    [ "$n" = 7 ] && report "dtviz --frames: one PNG per position" 1 "$n frames" ||
        report "dtviz --frames: one PNG per position" 0 "$n frames, not 7"
    run "dtviz --export-chrome (training trace)" 0 "${viz[@]}" --export-chrome "$tmp/ddp.json" \
        "$ddp"
    if grep -q '"traceEvents"' "$tmp/ddp.json" 2>/dev/null; then
        report "dtviz --export-chrome wrote trace JSON" 1 "$(wc -c <"$tmp/ddp.json") bytes"
    else
        report "dtviz --export-chrome wrote trace JSON" 0 "no traceEvents in the file"
    fi

    # bad input: a message naming dtviz and exit status 2, never a crash
    head -c 300 "$traces/08_ring_allreduce-4.trace" >"$tmp/cut.trace"
    printf 'this is not a trace\n' >"$tmp/junk.trace"
    local bad
    while IFS='|' read -r name bad; do
        eval "set -- $bad"
        "${viz[@]}" "$@" >"$log" 2>&1 </dev/null
        rc=$?
        if [ "$rc" = 2 ] && grep -q '^dtviz: ' "$log"; then
            report "dtviz $name" 1 "exit 2, $(grep -m1 '^dtviz: ' "$log" | cut -c1-60)"
        else
            report "dtviz $name" 0 "$(status_words $rc), expected exit 2 and a 'dtviz:' message"
        fi
    done <<EOF
unknown algorithm|--algo ring-alreduce --png "$png"
--ranks 0|--ranks 0 --png "$png"
--ranks 65|--ranks 65 --png "$png"
--step -1|--step -1 --png "$png"
--size 10x|--size 10x --png "$png"
--bogus|--bogus
a missing trace|--png "$png" "$tmp/no-such.trace"
a truncated trace|--png "$png" "$tmp/cut.trace"
a file that is no trace|--png "$png" "$tmp/junk.trace"
a trace and --algo|--algo alltoall --png "$png" "$ddp"
--virtual outside interleaved|--algo zb-h1 --virtual 2 --png "$png"
EOF

    # files that are no traces (/dev/zero, endless lines, a folder, a binary...) and
    # outputs that cannot be written, for dtviz and dttrace: refused soon as bad input
    # (exit 2 and the Try line), never a hang; a full disk found (exit 1), not "wrote"
    run "dtviz, dttrace: no traces, bad output names" 0 env BUILD="$BUILD" \
        bash tests/viz_corrupt.sh --hostile
    # corrupted traces, as an outside check makes them; then the fuzzer, from real seeds
    run "dtviz on 200 corrupted traces" 0 env BUILD="$BUILD" bash tests/viz_corrupt.sh \
        "$traces"/0[3-8]*-4.trace "$ddp" "$pp" "$tt/fsdp.trace" "$tt/hybrid.trace"
    tail -n 1 "$log" | grep -q ' 0 crashed' || report "viz_corrupt summary" 0 "$(tail -n 1 "$log")"
    # the training traces' mutations draw their timetables too: some must draw
    tail -n 1 "$log" | grep -Eq ' timetables: [1-9][0-9]* drawn' ||
        report "viz_corrupt drew timetables" 0 "$(tail -n 2 "$log" | tr '\n' ' ')"
    local fuzz=$BUILD/fuzz/fuzz_trace
    if [ -x "$fuzz" ]; then
        mkdir -p "$tmp/corpus"
        cp "$traces"/0*-3.trace "$ddp" "$pp" "$tt"/*.trace "$tmp/corpus/"
        [ ! -s "$traces/27_ring_attention-3.trace" ] ||
            cp "$traces/27_ring_attention-3.trace" "$tmp/corpus/"
        # built-in pipelines (fuzz_trace.c's TRAIN_BYTE, schedule, stages, micro-batches)
        printf '\246\000\004\010' >"$tmp/corpus/gpipe-4-8"
        printf '\246\001\003\005' >"$tmp/corpus/1f1b-3-5"
        run "libFuzzer: trace reader, model and timetable (${FUZZ_SECONDS:-10} s)" 0 \
            ${limit[@]+"${limit[@]}"} "$fuzz" \
            -dict=tests/fuzz_trace.dict -max_total_time="${FUZZ_SECONDS:-10}" -timeout=10 \
            -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
            -artifact_prefix="$BUILD/fuzz/" "$tmp/corpus"
    else
        missing "fuzz_trace (needs clang)" "$fuzz"
    fi

    # a real window: Xvfb, keys and a click from xdotool
    run "dtviz in a window under Xvfb" 0 env BUILD="$BUILD" bash tests/viz_xvfb.sh

    # make demo without a display, with only what it runs installed (tests/demo.sh)
    . tests/demo.sh
    demo_tests
}
want 6 && timed 6 viz_tests

# ==== 7. the grader ====
# Fair both ways: dtlab's reference gets full marks, the untouched exercises get zero,
# quickly; each planted mistake (tests/grade/mistakes/NAME/, with the regex its message
# must match in expect, and the exercise's score "P/M" it must get in score where there
# is one) loses points with that message; hidden tests add their points;
# bad settings are refused with status 2.
grade_tests() {
    local total re name dir ex pts g=(env BUILD="$BUILD" MPIEXEC="$MPIEXEC")
    # score NAME WANT [EXERCISE]: checks the "total: P/M points" line of the last grading,
    # or with EXERCISE, that exercise's row of its table ("NN_topic   P/M")
    score() {
        if [ -n "${3:-}" ]; then
            total=$(grep -E "^$3 +[0-9]+/[0-9]+\$" "$log" | tail -n 1 | tr -s ' ')
            local p=${total##* }
        else
            total=$(grep -E '^total: [0-9]+/[0-9]+ points$' "$log" | tail -n 1)
            local p=${total#total: } ; p=${p% points}
        fi
        local got=${p%/*} max=${p#*/}
        case $2 in
            full) [ -n "$total" ] && [ "$got" = "$max" ] && [ "$max" -gt 0 ] ;;
            zero) [ -n "$total" ] && [ "$got" = 0 ] && [ "$max" -gt 0 ] ;;
            less) [ -n "$total" ] && [ "$got" -lt "$max" ] ;;
        esac && report "$1" 1 "$total" || report "$1" 0 "${total:-no total line}, want $2"
    }
    # tap_of EXERCISE FILE: EXERCISE's entries in the TAP report FILE, with their messages
    tap_of() {
        awk -v ex="$1 " '/^(not )?ok [0-9]+ - / { s = $0; sub(/^(not )?ok [0-9]+ - /, "", s)
                                                 on = index(s, ex) == 1 }
                         /^#/ { on = 0 } on' "$2"
    }
    # the grading programs of dtlab's reference first: every grading below uses them
    run "make grade's reference programs" 0 make --no-print-directory -s -j2 BUILD="$BUILD" \
        ${CUDA:+CUDA=$CUDA} SOLUTION=1 $(cd exercises && printf "$BUILD/grade/solution/%s " [0-9][0-9]_*)

    # The gradings below are independent of each other: each grades files of its own
    # folder (so builds into a folder of its own) and writes a TAP report of its own. They
    # run eight at a time (job_bg), the longest first: the reference (every exercise at 1 to
    # 5 ranks and 7), then those that mostly wait (the stubs and the cheats, whose every
    # case ends early, a rank that dies giving its message time to reach the terminal; the
    # planted deadlocks, whose cases wait GRADE_WAIT), the learners' 05 and 06 (up to 7
    # ranks), the clone; they are judged afterwards, in the order of the verdicts below.
    local gd=$jobdir

    # -- what they grade --
    # Whole submissions that cheat: the stubs with every gap replaced by an exit. An exit
    # status is no verdict: they get nothing, and the report says the program ended early.
    local cheats=('MPI_Finalize(); exit(0);' 'exit(0);') i only
    for i in 0 1; do
        rm -rf "$tmp/cheat$i" && mkdir -p "$tmp/cheat$i"
        for f in exercises/[0-9][0-9]_*/*.c; do
            mkdir -p "$tmp/cheat$i/$(basename "$(dirname "$f")")"
            { echo '#include <stdlib.h>'; sed "s/EX_TODO();/${cheats[i]}/" "$f"; } \
                >"$tmp/cheat$i/$(basename "$(dirname "$f")")/$(basename "$f")"
        done
    done
    # (graded as ID|CHEAT|EX from $tmp/cheatID: the first, on every exercise, a run for
    # each case that ends a rank, in four gradings side by side, each a quarter of them;
    # the second the same on one exercise: time; at 3 ranks only, as an exit ends a
    # grading early at any count and the untouched stubs' run covers 1 rank)
    local exs k part
    exs=($(cd exercises && ls -d [0-9][0-9]_* | cut -c1-2))
    k=$(((${#exs[@]} + 1) / 2))
    local halves=("${exs[*]:0:k}" "${exs[*]:k}")      # (the untouched stubs')
    local cparts=() j q=$(((${#exs[@]} + 3) / 4))     # (the cheats': in quarters, as
    for ((j = 0; j < 4; j++)); do                     # their runs mostly wait)
        [ -n "${exs[*]:j*q:q}" ] || continue
        cparts+=("0$j|0|${exs[*]:j*q:q}")
        cp -r "$tmp/cheat0" "$tmp/cheat0$j"
    done
    cparts+=("1|1|04")
    rm -rf "$tmp/cheat0"
    # A mistake is a learner's file, NAME/NN_topic/topic.c, or a sed script that plants
    # it in a correct answer: NAME/NN_topic.learner.sed in a learner's
    # (tests/grade/learner/NN_topic/topic.c), graded as a course would, or NAME/NN_topic.sed
    # in dtlab's (tests/grade/ref/NN_topic.c), graded without the rules (dtlab's answers
    # call the library).
    # (at 1 and 2 ranks, or the ranks NAME/ranks names, and 2 s a wait, or the seconds
    # NAME/wait names: each planted mistake shows there, a deadlock is named after 2 s,
    # or 1 s for the deadlocks, whose every case waits that long, and make test stays
    # under 10 minutes)
    # The mistakes are graded in rounds: a round is a folder with at most one mistake of
    # each exercise, all graded with the same settings (the rules on or off, the ranks,
    # the wait) by one grade.sh, EX naming their exercises; so the grader starts, checks
    # the reference programs and builds for several mistakes at once. Each mistake is
    # judged by its exercise's row of the table and its exercise's entries in the report.
    local base rules ranks gwait key r sed nround=0 planted=()
    local -A round=() rset=() rexs=() rid=() taken=() mex=()
    for dir in tests/grade/mistakes/*/; do
        [ -e "$dir/expect" ] || continue
        name=$(basename "$dir")
        sed=$(ls "$dir"[0-9][0-9]_*.sed 2>/dev/null | head -n 1)
        rules=1
        if [ -n "$sed" ]; then
            ex=$(basename "$sed" .sed)
            if [[ $ex == *.learner ]]; then
                ex=${ex%.learner}
                base=tests/grade/learner/$ex/${ex#*_}.c
            else
                base=tests/grade/ref/$ex.c
                rules=0
            fi
            mkdir -p "$tmp/mistakes/$name/$ex"
            sed -f "$sed" "$base" >"$tmp/mistakes/$name/$ex/${ex#*_}.c"
            if cmp -s "$base" "$tmp/mistakes/$name/$ex/${ex#*_}.c"; then
                : >"$log"
                report "grade a planted mistake: $name" 0 "$sed no longer changes $base"
                continue
            fi
            dir=$tmp/mistakes/$name/
        else
            ex=$(ls -d "$dir"[0-9][0-9]_*/ 2>/dev/null | head -n 1)
            ex=${ex%/} ex=${ex##*/}
            if [ -z "$ex" ]; then
                : >"$log"
                report "grade a planted mistake: $name" 0 "no NN_topic/ and no NN_topic.sed in $dir"
                continue
            fi
        fi
        ranks="1 2" gwait=2
        [ -f "tests/grade/mistakes/$name/ranks" ] &&
            ranks=$(head -n 1 "tests/grade/mistakes/$name/ranks")
        [ -f "tests/grade/mistakes/$name/wait" ] &&
            gwait=$(head -n 1 "tests/grade/mistakes/$name/wait")
        # the first round of these settings without a mistake of this exercise
        key="$rules|$ranks|$gwait" r=0
        while [ -n "${taken[$key|$r|$ex]:-}" ]; do r=$((r + 1)); done
        taken[$key|$r|$ex]=1
        if [ -z "${rid[$key|$r]:-}" ]; then
            nround=$((nround + 1)) && rid[$key|$r]=$nround && rset[$nround]=$key
        fi
        r=${rid[$key|$r]}
        mkdir -p "$tmp/rounds/$r"
        cp -r "$dir$ex" "$tmp/rounds/$r/"
        rexs[$r]+="${rexs[$r]:+ }${ex%%_*}"
        round[$name]=$r mex[$name]=$ex
        planted+=("$name")
    done
    # grade_round R: grades round R's folder (ranks "default": the grader's own, with the
    # exercise's past 5)
    grade_round() {
        local rules ranks gwait rk
        IFS='|' read -r rules ranks gwait <<<"${rset[$1]}"
        rk=(GRADE_RANKS="$ranks")
        [ "$ranks" = default ] && rk=()
        job_bg "r-$1" "${g[@]}" WORK="$tmp/rounds/$1" EX="${rexs[$1]}" GRADE_TIMEOUT=10 \
            ${rk[@]+"${rk[@]}"} GRADE_WAIT="$gwait" RULES="$rules" TAP="$gd/r-$1.tap" \
            bash tests/grade/grade.sh
    }
    # The same WORK path again with another file dated in the past (an archive unpacked,
    # a .mine put back): it is graded, not the last build (at 1 and 3 ranks)
    rm -rf "$tmp/sub" && mkdir -p "$tmp/sub" && cp -r tests/grade/learner/02_reduce_scatter "$tmp/sub/"
    resubmit() {
        job s-1 "${g[@]}" WORK="$tmp/sub" EX=02 TAP="$gd/s-1.tap" GRADE_RANKS="1 3" \
            bash tests/grade/grade.sh
        sed -i 's/dt_ring_rs_send_chunk(rank, n, s)/dt_ring_rs_send_chunk(rank, n, s + 1)/' \
            "$tmp/sub/02_reduce_scatter/reduce_scatter.c"
        touch -d 2001-01-01 "$tmp/sub/02_reduce_scatter/reduce_scatter.c"
        job s-2 "${g[@]}" WORK="$tmp/sub" EX=02 TAP="$gd/s-2.tap" GRADE_RANKS="1 3" \
            bash tests/grade/grade.sh
    }
    # Any path: a clone whose path holds a space, a quote and a '$', grading a submission,
    # writing the report and reading hidden tests at such paths (the clone reuses this
    # build's objects, its sources dated back so that make rebuilds nothing; at 1 and 3
    # ranks: the paths are what is tested); with BUILD relative, as make test's
    local learned odd="$tmp/a learner's \$HOME dir"
    learned=$(cd tests/grade/learner && ls -d [0-9][0-9]_* | cut -c1-2 | tr '\n' ' ')
    odd_path() {
        git clone -q . "$odd" 2>/dev/null || return
        find "$odd" -path "$odd/.git" -prune -o -type f -exec touch -d 2000-01-01 {} +
        mkdir -p "$odd/$BUILD/grade" "$odd/my \"work\" & co" "$odd/hidden tests"
        cp -a "$BUILD/config" "$BUILD/libdt.a" "$BUILD/obj" "$odd/$BUILD/"
        cp -a "$BUILD/grade/solution" "$odd/$BUILD/grade/"
        cp -r tests/grade/learner/* "$odd/my \"work\" & co/"
        cp tests/grade/hidden_example/*.c "$odd/hidden tests/"
        : >"$gd/odd.cloned"
        job odd-1 make --no-print-directory -s -C "$odd" grade BUILD="$BUILD" MPIEXEC="$MPIEXEC" \
            EX="${learned%% *}" WORK="$odd/my \"work\" & co" TAP="$odd/the report's.tap" \
            GRADE_RANKS="1 3"
        job odd-2 make --no-print-directory -s -C "$odd" grade BUILD="$BUILD" MPIEXEC="$MPIEXEC" \
            SOLUTION=1 EX=04 EXTRA_TESTS="$odd/hidden tests" GRADE_RANKS="1 3"
    }

    # make reset in a clone: the file back as committed, the learner's kept beside it
    local f=exercises/02_reduce_scatter/reduce_scatter.c
    reset_clone() {
        git clone -q . "$tmp/clone" 2>/dev/null || return
        echo "/* the learner's work */" >>"$tmp/clone/$f"
        : >"$gd/reset.cloned"
        job reset-1 make --no-print-directory -s -C "$tmp/clone" reset EX=02
        job reset-2 make --no-print-directory -s -C "$tmp/clone" reset EX=99
    }
    # bad settings, each refused with status 2
    local bads=("EX=99" "SOLUTION=2" "HINTS=yes" "STRICT=2" "GRADE_WAIT=0" "GRADE_TIMEOUT=0"
                "GRADE_RANKS=x" "WORK=/nonexistent" "EXTRA_TESTS=/nonexistent")
    bad_settings() {
        for i in "${!bads[@]}"; do
            job "bad-$i" "${g[@]}" "${bads[i]}" bash tests/grade/grade.sh
        done
    }

    # -- the gradings --
    job_par=8
    job_bg ref "${g[@]}" SOLUTION=1 TAP="$gd/ref.tap" bash tests/grade/grade.sh
    # The untouched exercises (at 1 and 3 ranks: a gap fails at every count, so two show
    # it, in half the time); then STRICT=1, below full marks on them (after that grading,
    # which builds into the same folder).
    # (a learner's checkout, with exercises filled in, cannot score zero: skipped there)
    local untouched=1
    [ -n "$(git status --porcelain -- 'exercises/*.c' 2>/dev/null)" ] && untouched=0
    # (in two halves side by side, into the same folder, their programs apart: each gap
    # is a run that waits for its rank's death)
    stubs() {
        if [ "$untouched" = 1 ]; then
            job stub-a "${g[@]}" EX="${halves[0]}" TAP="$gd/stub-a.tap" GRADE_RANKS="1 3" \
                bash tests/grade/grade.sh &
            job stub-b "${g[@]}" EX="${halves[1]}" TAP="$gd/stub-b.tap" GRADE_RANKS="1 3" \
                bash tests/grade/grade.sh
            wait
        fi
        job strict "${g[@]}" EX=02 STRICT=1 TAP="$tmp/s.tap" bash tests/grade/grade.sh
    }
    job_bg stubs stubs
    for part in "${cparts[@]}"; do
        IFS='|' read -r k i only <<<"$part"
        job_bg "c-$k" "${g[@]}" WORK="$tmp/cheat$k" EX="$only" TAP="$gd/c-$k.tap" \
            GRADE_RANKS="3" bash tests/grade/grade.sh
    done
    for ((r = 1; r <= nround; r++)); do     # (the deadlocks': a wait other than 2 s)
        [[ ${rset[$r]} == *'|2' ]] || grade_round "$r"
    done
    # a learner's own correct answers (tests/grade/learner/), held to the rules: full marks
    # (05 and 06, graded up to 7 ranks, first)
    local first="" rest=""
    for ex in $learned; do
        case $ex in 05|06) first+=" $ex" ;; *) rest+=" $ex" ;; esac
    done
    for ex in $first; do
        job_bg "l-$ex" "${g[@]}" WORK=tests/grade/learner EX="$ex" STRICT=1 TAP="$gd/l-$ex.tap" \
            bash tests/grade/grade.sh
    done
    case $BUILD in /*) ;; *) job_bg odd odd_path ;; esac
    job_bg s resubmit
    # (hidden tests: in the clone, from a path with a space; here only where that cannot run)
    [[ $BUILD == /* ]] && job_bg hidden "${g[@]}" SOLUTION=1 EX=04 \
        EXTRA_TESTS=tests/grade/hidden_example TAP="$tmp/x.tap" bash tests/grade/grade.sh
    job_bg reset reset_clone
    job_bg bad bad_settings
    # (the rest at 1 to 3 ranks: the reference's grading above runs every suite at 1 to 5,
    # and a learner's answer that is right at 1, 2 and 3, odd and even, is a right one)
    for ex in $rest; do
        job_bg "l-$ex" "${g[@]}" WORK=tests/grade/learner EX="$ex" STRICT=1 TAP="$gd/l-$ex.tap" \
            GRADE_RANKS="1 2 3" bash tests/grade/grade.sh
    done
    for ((r = 1; r <= nround; r++)); do
        [[ ${rset[$r]} == *'|2' ]] && grade_round "$r"
    done
    wait
    job_par=2

    # ---- the verdicts ----
    job_ran "make grade SOLUTION=1" 0 ref
    score "grade: the reference gets full marks" full
    ! grep -q '^not ok' "$gd/ref.tap" && grep -q '^1\.\.[1-9]' "$gd/ref.tap" &&
        report "grade: TAP report of the reference" 1 "$(grep -c '^ok' "$gd/ref.tap") ok" ||
        report "grade: TAP report of the reference" 0 "see $gd/ref.tap"
    if [ "$untouched" = 0 ]; then
        : >"$log"
        report "grade: the untouched exercises get zero" 1 "skipped: exercises/ has local changes"
    else
        for i in 0 1; do
            job_ran "make grade (the untouched exercises, EX=${halves[i]// /,})" 0 \
                "stub-$([ "$i" = 0 ] && echo a || echo b)"
            score "grade: the untouched exercises get zero" zero
            n=$(grep -c 'not implemented yet' "$log")
            [ "$n" -gt 0 ] && report "grade: unfilled gaps say 'not implemented yet'" 1 "$n cases" ||
                report "grade: unfilled gaps say 'not implemented yet'" 0 "none said so"
        done
    fi
    for name in ${planted[@]+"${planted[@]}"}; do
        re=$(head -n 1 "tests/grade/mistakes/$name/expect")
        ex=${mex[$name]} r=${round[$name]}
        job_ran "grade a planted mistake: $name" 0 "r-$r"
        score "  $name loses points" less "$ex"
        # (NAME/score, where there is one: the exercise's row must read exactly "P/M")
        if [ -f "tests/grade/mistakes/$name/score" ]; then
            pts=$(head -n 1 "tests/grade/mistakes/$name/score")
            [ "${total##* }" = "$pts" ] && report "  $name scores $pts" 1 "" ||
                report "  $name scores $pts" 0 "${total:-no row}, want $pts"
        fi
        # the TAP report holds each message whole (the table folds long lines)
        tap_of "$ex" "$gd/r-$r.tap" | grep -Eq -- "$re" &&
            report "  $name: the message says why" 1 "/$re/" ||
            report "  $name: the message says why" 0 "no /$re/ in $ex's part of $gd/r-$r.tap"
    done
    for ex in $learned; do
        job_ran "grade a learner's correct answer to $ex" 0 "l-$ex"
        score "  full marks, every rule kept" full
        # (the tree and recursive doubling: graded past 5 ranks by default)
        if [ "$ex" = 05 ] || [ "$ex" = 06 ]; then
            grep -q 'also graded at 7 ranks' "$log" &&
                report "  also graded at 7 ranks, by default" 1 "" ||
                report "  also graded at 7 ranks, by default" 0 "no 'also graded at 7 ranks'"
        fi
    done
    for part in "${cparts[@]}"; do
        IFS='|' read -r k i only <<<"$part"
        job_ran "grade the stubs with '${cheats[i]}' for every gap (EX=${only// /,})" 0 "c-$k"
        score "  they get zero" zero
        grep -q 'ended early' "$gd/c-$k.tap" && report "  the report says they ended early" 1 "" ||
            report "  the report says they ended early" 0 "no 'ended early' in $gd/c-$k.tap"
    done
    job_ran "grade a submission" 0 s-1
    score "  full marks" full
    job_ran "grade another, older file at the same path" 0 s-2
    score "  it is graded anew" less
    # STRICT=1: a course's CI fails below full marks
    job_ran "grade STRICT=1 below full marks exits 1" 1 strict
    if [[ $BUILD == /* ]]; then
        job_ran "grade with hidden tests (EXTRA_TESTS)" 0 hidden
        grep -q 'hidden tests 04_subcomm' "$log" && score "  the hidden cases count" full ||
            report "  the hidden cases count" 0 "no hidden suite in the table"
    fi
    if [ -f "$gd/reset.cloned" ]; then
        job_ran "make reset EX=02" 0 reset-1
        git -C "$tmp/clone" show "HEAD:$f" | cmp -s - "$tmp/clone/$f" &&
            grep -q "learner's work" "$tmp/clone/$f.mine" &&
            report "  the file is back, the learner's kept as .mine" 1 "" ||
            report "  the file is back, the learner's kept as .mine" 0 "$(ls "$tmp/clone/${f%/*}")"
        job_ran "make reset EX=99 is refused" 2 reset-2
    fi
    # the clone at an odd path (above), started with the gradings, judged after them
    if [ -f "$gd/odd.cloned" ]; then
        job_ran "make grade in a clone at a path with a space, a quote and a \$" 0 odd-1
        score "  full marks" full
        [ -s "$odd/the report's.tap" ] && report "  the TAP report is where TAP says" 1 "" ||
            report "  the TAP report is where TAP says" 0 "no $odd/the report's.tap"
        job_ran "  hidden tests from such a path" 0 odd-2
        grep -q 'hidden tests 04_subcomm' "$log" && score "  the hidden cases count" full ||
            report "  the hidden cases count" 0 "no hidden suite in the table"
    fi
    for i in "${!bads[@]}"; do
        job_ran "grade refuses ${bads[i]}" 2 "bad-$i"
    done
}
want 7 && timed 7 grade_tests

# ==== 8-18: each in its own file, which defines the function called here ====
#   8. bad input to every program a user runs          tests/badinput.sh
#   9. dying and stuck ranks                           tests/faults.sh
#  10. train's checkpoints                             tests/checkpoint.sh
#  11. random collectives against MPICH (bounded)      tests/stress.sh
#  12. mixture of experts                              tests/moe.sh
#  13. compressed gradients                            tests/compress.sh
#  14. synchronous against asynchronous accumulation   tests/async.sh
#  15. many hosts in network namespaces                tests/hosts.sh
#  17. fsdp --prefetch                                 tests/prefetch.sh
#  18. elastic training                                tests/elastic.sh
#  19. the docs' links and commands                    tests/docs.sh
#  20. Gradescope's autograder, a class at once        tests/gradescope.sh
for section in 8:badinput 9:faults 10:checkpoint 11:stress 12:moe 13:compress 14:async \
               15:hosts 16:gpu 17:prefetch 18:elastic 19:docs 20:gradescope; do
    if want "${section%%:*}" && [ -f "tests/${section#*:}.sh" ]; then
        . "tests/${section#*:}.sh"
        timed "${section%%:*}" "${section#*:}_tests"
    fi
done

echo
echo "seconds per section:$took_by_section"
[ "$failed" -eq 0 ] || echo "failed:$failures"
if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
