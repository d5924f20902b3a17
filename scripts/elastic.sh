#!/usr/bin/env bash
# Elastic training: keep a training job going when a rank is lost, as torchrun's
# elastic agent does, from the newest checkpoint with the ranks that remain.
#
#   scripts/elastic.sh -n 4 --min 2 -- build/train --mode fsdp --steps 40 \
#       --checkpoint ck --every 5
#
# runs `mpiexec -n 4 build/train ... --checkpoint ck --every 5`, adding `--resume ck`
# when ck/latest exists (so running the same command again continues the job). When a
# rank dies without a word (SIGKILL, the out-of-memory killer, a lost node: dtlab's
# watcher says "dtlab: rank R (pid ...) died without a word", lib/watch.c), mpiexec
# ends the whole job, and this script starts it again from the newest complete
# checkpoint, the one ck/latest names, on one rank fewer (or, with --replace, on as
# many: a replacement for a transient loss), down to --min ranks. A checkpoint that
# was being written when the rank died (ck/step-NNNNNNN.tmp) was never named by
# latest, so it is never used; the script removes it. train reshards the checkpoint
# to the new rank count (docs/checkpoints.md, "Elastic training"); lesson 25 (build/lessons/
# 25_elastic) runs it beside a job never stopped.
#
#   torchrun --nnodes 2:4 --max-restarts 3   this script -n 4 --min 2 --max-restarts 3
#   rendezvous: the workers that remain      the ranks that remain: N-1 (or N)
#   restart from the last checkpoint         the same: --resume DIR
#   any worker failure restarts              only a rank that died without a word;
#                                            an error it printed would come back
#
# What it does at each restart, on stderr, lines beginning "elastic.sh:": which rank
# died, the checkpoint discarded, the step it resumes from and how many ranks now.
# Any other failure (a usage error, exit 2; a refused resume; a crash or failed check
# that dtlab named; a hang or the time limit) ends the script with that status, with
# no restart. The program's stdout and stderr pass through.
#
# The test hooks DT_TEST_KILL and DT_TEST_CHECKPOINT_CRASH (docs/environment.md)
# stand for one fault: the restarts run without them.
#
# Exit status: 0 when the training completed; 2 for bad arguments; else the failed
# job's status (also when no restart is left: --min reached or --max-restarts spent,
# which it says). MPIEXEC_TIMEOUT, when set and not 0, limits the whole script,
# restarts included: each mpiexec gets the seconds that remain.
set -u

me=scripts/elastic.sh
MPIEXEC=${MPIEXEC:-mpiexec}

usage="usage: $me -n N [--min M] [--replace] [--max-restarts K] -- PROGRAM [ARGS...]
Runs mpiexec -n N PROGRAM ARGS (train), and when a rank dies without a word, runs it
again from the newest checkpoint with the ranks that remain.
  -n N              ranks to start with, 1 to 64
  --min M           fewest ranks to go on with, 1 to N (default 1)
  --replace         restart on N ranks again (a transient loss), not N-1
  --max-restarts K  restarts at most, 0 to 100 (default 3)
  --help            this text
ARGS must hold --checkpoint DIR (with --every K for a checkpoint every K steps), and
not --resume: the script adds --resume DIR when DIR/latest exists, the first run
included, so the same command continues a job. Environment: MPIEXEC, MPIEXEC_TIMEOUT
(seconds for the whole script, restarts included)."

say() { echo "elastic.sh: $*" >&2; }
bad() {
    echo "elastic.sh: $*" >&2
    echo "Try '$me --help' for usage." >&2
    exit 2
}

# whole NAME VALUE MIN MAX: VALUE is a whole number in [MIN, MAX], or a usage error.
whole() {
    case $2 in
        "" | *[!0-9]*) bad "$1 must be a whole number, not '$2'" ;;
    esac
    [ ${#2} -le 6 ] && [ "$2" -ge "$3" ] && [ "$2" -le "$4" ] ||
        bad "$1 must be from $3 to $4, not '$2'"
}

# ==== the arguments ====
n="" min=1 replace=0 max_restarts=3
while [ $# -gt 0 ]; do
    case $1 in
        -h | --help) echo "$usage"; exit 0 ;;
        -n) [ $# -ge 2 ] || bad "-n needs a value"
            whole -n "$2" 1 64; n=$2; shift 2 ;;
        --min) [ $# -ge 2 ] || bad "--min needs a value"
               whole --min "$2" 1 64; min=$2; shift 2 ;;
        --max-restarts) [ $# -ge 2 ] || bad "--max-restarts needs a value"
                        whole --max-restarts "$2" 0 100; max_restarts=$2; shift 2 ;;
        --replace) replace=1; shift ;;
        --) shift; break ;;
        -*) bad "unknown option '$1' (the program's own options go after --)" ;;
        *) break ;;
    esac
done
[ -n "$n" ] || bad "-n N, the ranks to start with, is missing"
[ "$min" -le "$n" ] || bad "--min $min is more than the $n ranks to start with"
[ $# -ge 1 ] || bad "no program: put it after --"

# DIR from the program's --checkpoint DIR (or --checkpoint=DIR); --resume is ours
dir="" prev=""
for a in "$@"; do
    case $prev in
        --checkpoint) dir=$a ;;
        --resume) bad "leave --resume out: the script adds --resume DIR itself" ;;
    esac
    case $a in
        --checkpoint=*) dir=${a#--checkpoint=} ;;
        --resume=*) bad "leave --resume out: the script adds --resume DIR itself" ;;
    esac
    prev=$a
done
[ "$prev" != --checkpoint ] || bad "--checkpoint needs a value"
[ -n "$dir" ] || bad "the program's arguments need --checkpoint DIR: a restart resumes" \
                     "from DIR's newest checkpoint"

# ==== time limit, signals ====
deadline=""
if [ -n "${MPIEXEC_TIMEOUT:-}" ]; then
    whole MPIEXEC_TIMEOUT "$MPIEXEC_TIMEOUT" 0 999999
    [ "$MPIEXEC_TIMEOUT" = 0 ] || deadline=$((SECONDS + MPIEXEC_TIMEOUT))
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/dtlab-elastic.XXXXXX") || exit 1
job="" caught=""
# a signal to the script goes to mpiexec, which ends the ranks; then the script ends
on_signal() {
    caught=$1
    if [ -s "$work/pid" ]; then
        kill -s "$1" "$(cat "$work/pid")" 2>/dev/null
    fi
}
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT
trap 'on_signal HUP' HUP
trap 'rm -rf "$work"' EXIT

# launch RANKS FIRST: mpiexec -n RANKS PROGRAM ARGS [--resume DIR], stdout through,
# stderr through and into $work/stderr; sets rc. FIRST 0: without the test hooks.
launch() {
    local ranks=$1 first=$2 t=()
    local cmd=("$@")
    cmd=("${cmd[@]:2}")
    [ "$first" = 1 ] || t=(-u DT_TEST_KILL -u DT_TEST_CHECKPOINT_CRASH)
    [ -z "$deadline" ] || t+=(MPIEXEC_TIMEOUT=$((deadline - SECONDS)))
    : >"$work/stderr"
    : >"$work/pid"
    (
        { env ${t[@]+"${t[@]}"} sh -c 'echo $$ >"$0"; exec "$@"' "$work/pid" \
              "$MPIEXEC" -n "$ranks" "${cmd[@]}" 2>&1 1>&3 3>&- |
              tee -a "$work/stderr" >&2; } 3>&1
        exit "${PIPESTATUS[0]}"
    ) &
    job=$!
    wait "$job"
    rc=$?
    while kill -0 "$job" 2>/dev/null; do     # a signal came: wait for the job's end
        [ -z "$caught" ] || on_signal "$caught"   # again: it may have come before the pid
        wait "$job"
        rc=$?
    done
}

# the step the checkpoint DIR/latest names, or "" when there is none
latest_step() {
    local l
    l=$(cat "$dir/latest" 2>/dev/null) || return
    l=${l#step-}
    case $l in
        "" | *[!0-9]*) return ;;
    esac
    echo $((10#$l))
}

# ==== the job, and its restarts ====
ranks=$n restarts=0
prog=("$@")
while :; do
    args=("${prog[@]}")
    from=$(latest_step)
    [ -z "$from" ] || args+=(--resume "$dir")
    if [ -n "$deadline" ] && [ $((deadline - SECONDS)) -lt 1 ]; then
        say "the time limit (MPIEXEC_TIMEOUT=$MPIEXEC_TIMEOUT s) is spent: giving up"
        exit 124
    fi
    [ "$restarts" != 0 ] || [ -z "$from" ] ||
        say "$dir holds the checkpoint of step $from: the job goes on from it"
    [ -n "$caught" ] || launch "$ranks" $((restarts == 0)) "${args[@]}"
    if [ -n "$caught" ]; then
        say "stopped by SIG$caught: no restart"
        exit $((128 + $(kill -l "$caught")))
    fi
    if [ "$rc" = 0 ]; then
        [ "$restarts" = 0 ] ||
            say "the training completed on $ranks rank$([ "$ranks" = 1 ] || echo s)" \
                "after $restarts restart$([ "$restarts" = 1 ] || echo s)"
        exit 0
    fi
    line=$(grep -m 1 -E '^dtlab: rank [0-9]+ \(pid [0-9]+ on [^)]*\) died' "$work/stderr")
    if [ -z "$line" ] || grep -qE 'APPLICATION TIMED OUT|time limit is nearly reached' \
                              "$work/stderr"; then
        say "the job failed (exit $rc) without losing a rank: no restart"
        exit "$rc"
    fi
    dead=${line#dtlab: rank }
    dead=${dead%% *}
    say "rank $dead of $ranks died (exit $rc)"
    for t in "$dir"/step-*.tmp; do
        [ -e "$t" ] || continue
        rm -rf "$t"
        say "discarded ${t##*/}, the checkpoint being written when it died (latest" \
            "never named it)"
    done
    [ "$replace" = 1 ] || ranks=$((ranks - 1))
    if [ "$ranks" -lt "$min" ]; then
        say "giving up: $ranks rank$([ "$ranks" = 1 ] || echo s) would remain, fewer" \
            "than --min $min"
        exit "$rc"
    fi
    if [ "$restarts" -ge "$max_restarts" ]; then
        say "giving up: $restarts restart$([ "$restarts" = 1 ] || echo s) made," \
            "--max-restarts $max_restarts"
        exit "$rc"
    fi
    restarts=$((restarts + 1))
    from=$(latest_step)
    if [ -n "$from" ]; then
        where="from the checkpoint of step $from ($dir/$(cat "$dir/latest"))"
    else
        where="from the start: no checkpoint was complete"
    fi
    say "restart $restarts of at most $max_restarts: $ranks rank$([ "$ranks" = 1 ] ||
        echo s) ($([ "$replace" = 1 ] && echo "a replacement for rank $dead" ||
        echo "one fewer; --min $min")), $where"
done
