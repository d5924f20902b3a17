#!/usr/bin/env bash
# dtlab's grader: `make grade` runs it. It builds each exercise's suite against the code
# graded, runs every case alone under mpiexec with a time limit at every rank count, and
# prints a points table whose last line is "total: P/M points". A TAP report of the same
# results is written for course tooling.
#
# Settings (make variables, passed here through the environment):
#   EX=NN           grade exercise NN only (or NN_topic); default: all of them
#   SOLUTION=1      grade dtlab's reference implementations (tests/grade/ref/)
#   WORK=DIR        grade the exercise files under DIR (DIR/NN_topic/topic.c) instead
#                   of exercises/: a submission's copy, for instance
#   EXTRA_TESTS=DIR add the suites DIR/NN_*.c (an instructor's hidden tests)
#   TAP=FILE        where the TAP report goes (default $BUILD/grade/results.tap)
#   GRADE_RANKS     rank counts (default "1 2 3 4 5"); GRADE_TIMEOUT seconds per run
#                   (default 30), after which a run counts as a probable deadlock
#   BUILD, CUDA, MPIEXEC  as for make
# Exit status: 0 when the grading ran (whatever the score), 2 for bad settings, 1 when
# dtlab itself could not be built.
set -u
cd "$(dirname "$0")/../.." || exit 1

BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec}
EX=${EX:-}
SOLUTION=${SOLUTION:-0}
WORK=${WORK:-}
EXTRA_TESTS=${EXTRA_TESTS:-}
GRADE_RANKS=${GRADE_RANKS:-1 2 3 4 5}
GRADE_TIMEOUT=${GRADE_TIMEOUT:-30}
TAP=${TAP:-$BUILD/grade/results.tap}
MAKE=${MAKE:-make}

usage() {
    cat >&2 <<EOF
grade: $1
usage: make grade [EX=NN] [SOLUTION=1] [WORK=DIR] [EXTRA_TESTS=DIR] [TAP=FILE]
                  [GRADE_RANKS="1 2 3 4 5"] [GRADE_TIMEOUT=30]
The exercises: $(cd exercises && echo [0-9][0-9]_*/ | tr -d /)
EOF
    exit 2
}

# ==== the settings ====

[ $# = 0 ] || usage "'$1': the settings are make variables, such as make grade EX=03"

case $SOLUTION in 0|1|'') ;; *) usage "SOLUTION is '$SOLUTION'; it must be 0 or 1" ;; esac
[[ $GRADE_TIMEOUT =~ ^[1-9][0-9]{0,3}$ ]] ||
    usage "GRADE_TIMEOUT is '$GRADE_TIMEOUT'; it must be whole seconds, 1 to 9999"
for n in $GRADE_RANKS; do
    [[ $n =~ ^[1-9][0-9]?$ ]] || usage "GRADE_RANKS holds '$n'; rank counts are 1 to 99"
done
[ -n "${GRADE_RANKS// /}" ] || usage "GRADE_RANKS is empty"
if [ -n "$WORK" ]; then
    [ -d "$WORK" ] || usage "WORK=$WORK is not a directory"
    [ "$SOLUTION" = 1 ] && usage "WORK and SOLUTION=1 do not go together"
fi
if [ -n "$EXTRA_TESTS" ]; then
    [ -d "$EXTRA_TESTS" ] || usage "EXTRA_TESTS=$EXTRA_TESTS is not a directory"
    EXTRA_TESTS=$(cd "$EXTRA_TESTS" && pwd)
fi

[[ $EX =~ ^[0-9]$ ]] && EX=0$EX         # EX=3 means 03
all=()
for d in exercises/[0-9][0-9]_*/; do
    d=${d%/}
    all+=("${d#exercises/}")
done
exercises=()
for e in "${all[@]}"; do
    if [ -z "$EX" ] || [ "$EX" = "$e" ] || [ "$EX" = "${e%%_*}" ]; then
        exercises+=("$e")
    fi
done
[ ${#exercises[@]} -gt 0 ] || usage "there is no exercise '$EX'"

if [ "$SOLUTION" = 1 ]; then
    set_name="dtlab's reference implementations (SOLUTION=1)"
    src=exercises
    out=$BUILD/grade/solution
elif [ -n "$WORK" ]; then
    set_name="the files under $WORK"
    src=$WORK
    out=$BUILD/grade/work-$(printf '%s' "$WORK" | cksum | cut -d' ' -f1)
else
    set_name="your files in exercises/"
    src=exercises
    out=$BUILD/grade/learner
fi
ref=$BUILD/grade/solution

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtlab-grade.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
log=$tmp/log
[ ! -d "$TAP" ] || usage "TAP=$TAP is a folder; it names the report's file"
mkdir -p "$(dirname "$TAP")" 2>/dev/null || usage "TAP=$TAP: cannot make its folder"

# CUDA as the library was built (make passes it), so the configuration stays the same
mk() { $MAKE --no-print-directory -s BUILD="$BUILD" ${CUDA:+CUDA=$CUDA} EXTRA_TESTS="$EXTRA_TESTS" "$@"; }

# ==== running one case ====

# run_case BIN CASE N KIND: runs the case at N ranks; sets verdict ("" when it passed)
# and cmd, the command that reproduces the run.
run_case() {
    local bin=$1 name=$2 n=$3 rc at="at $n ranks, "
    [ "$n" = 1 ] && at="at 1 rank, "
    [ "$4" = pure ] && at=""
    cmd="MPIEXEC_TIMEOUT=$GRADE_TIMEOUT $MPIEXEC -n $n $bin --case $name"
    MPIEXEC_TIMEOUT=$GRADE_TIMEOUT timeout -k 5 $((GRADE_TIMEOUT + 10)) \
        $MPIEXEC -n "$n" "$bin" --case "$name" >"$log" 2>&1 </dev/null
    rc=$?
    verdict=""
    [ $rc = 0 ] && return
    local why
    if why=$(grep -o -m1 'ex_[A-Za-z0-9_]* is not implemented yet' "$log"); then
        verdict="$why (TODO(exercise) left)"
    # a deadlock: mpiexec's time limit, or dtlab's own a little before it (lib/p2p.c)
    elif [ $rc = 124 ] || [ $rc = 137 ] || grep -q 'APPLICATION TIMED OUT' "$log" ||
         grep -Eq '^dtlab: rank [0-9]+: .*: waited [0-9.]+ s for ' "$log"; then
        if [ "$4" = pure ]; then
            verdict="no end after $GRADE_TIMEOUT s: an endless loop?"
        elif [ "$n" = 1 ]; then
            verdict="probable deadlock at 1 rank: no end after $GRADE_TIMEOUT s (a rank waiting for a message from itself? with one rank there is no one to talk to)"
        else
            verdict="probable deadlock at $n ranks: no end after $GRADE_TIMEOUT s. Every rank waiting for a message that never comes? Once a message is larger than MPI's eager limit (about 16 KiB here), dt_send waits until its receiver has posted the receive: if every rank sends first, none ever receives. Use dt_sendrecv, or let one side receive first"
        fi
    elif why=$(grep -o -m1 'rank [0-9]*: crashed with signal .*' "$log"); then
        verdict="$at$why"
    elif why=$(grep -m1 '^failed: ' "$log"); then
        # "K failed check(s) over N ranks; the first, on rank R: msg" -> "rank R: msg"
        why=$(printf '%s' "${why#failed: }" | sed -E 's/^[0-9]+ failed check\(s\) over [0-9]+ ranks; the first, on (rank [0-9]+): /\1: /')
        [ "$4" = pure ] && why=${why#rank 0: }
        verdict="$at$why"
    elif why=$(grep -m1 '^dtlab: rank ' "$log"); then
        verdict="${at}stopped by dtlab: ${why#dtlab: }"
    elif why=$(grep -o -m1 'EXIT CODE: [0-9]*' "$log"); then
        verdict="${at}a rank ended abnormally ($why; $(grep -o -m1 'EXIT STRING: .*' "$log"))"
    else
        verdict="${at}exit status $rc: $(tail -n 1 "$log")"
    fi
}

# ==== grading ====

total=0
max=0
ntap=0
tapbody=$tmp/tap
: >"$tapbody"

tap() {   # tap OK NAME [DETAIL CMD]
    ntap=$((ntap + 1))
    if [ "$1" = 1 ]; then
        echo "ok $ntap - $2" >>"$tapbody"
    else
        { echo "not ok $ntap - $2"
          echo "  ---"
          printf '  message: "%s"\n' "$(printf '%s' "$3" | sed 's/\\/\\\\/g; s/"/\\"/g')"
          [ -n "$4" ] && printf '  command: "%s"\n' "$4"
          echo "  ..."; } >>"$tapbody"
    fi
}

echo "Grading $set_name at ${GRADE_RANKS// /, } ranks, at most $GRADE_TIMEOUT s a run."
echo

# grade_suite LABEL REFBIN BIN BUILT BUILDMSG: runs every case of one suite
grade_suite() {
    local label=$1 refbin=$2 bin=$3 built=$4 buildmsg=$5
    local name pts kind what ranks n got=0 sum=0
    while IFS=$'\t' read -r name pts kind what; do
        [ -n "$name" ] || continue
        sum=$((sum + pts))
        ranks=$GRADE_RANKS
        [ "$kind" = pure ] && ranks=1
        verdict=""; cmd=""
        if [ "$built" = 0 ]; then
            verdict="$buildmsg"
        else
            for n in $ranks; do
                run_case "$bin" "$name" "$n" "$kind"
                [ -n "$verdict" ] && break
            done
        fi
        if [ -z "$verdict" ]; then
            got=$((got + pts))
            printf '   ok    %-18s %2d/%-2d %s\n' "$name" "$pts" "$pts" "$what" >>"$tmp/rows"
            tap 1 "$label $name ($pts points)"
        else
            printf '   FAIL  %-18s %2d/%-2d %s\n' "$name" 0 "$pts" "$what" >>"$tmp/rows"
            printf '         %s\n' "$verdict" | fold -s -w 88 | sed '2,$s/^/         /' >>"$tmp/rows"
            [ -n "$cmd" ] && printf '         rerun: %s\n' "$cmd" >>"$tmp/rows"
            tap 0 "$label $name ($pts points)" "$verdict" "$cmd"
        fi
    done < <("$refbin" --list)
    suite_got=$got
    suite_max=$sum
}

# The reference programs list the cases even when the learner's file does not build.
if ! mk SOLUTION=1 "${exercises[@]/#/$ref/}" >"$log" 2>&1; then
    cat "$log" >&2
    echo "grade: dtlab's own grading programs do not build (above); nothing was graded" >&2
    exit 1
fi

for e in "${exercises[@]}"; do
    : >"$tmp/rows"
    egot=0; emax=0
    suites=("$e")
    if [ -n "$EXTRA_TESTS" ]; then
        for f in "$EXTRA_TESTS/${e%%_*}"_*.c; do
            [ -e "$f" ] && suites+=("extra/$(basename "$f" .c)")
        done
    fi
    for s in "${suites[@]}"; do
        built=1; buildmsg=""
        if [ "$s" != "$e" ] && ! mk SOLUTION=1 "$ref/$s" >"$log" 2>&1; then
            cat "$log" >&2
            echo "grade: the extra suite $EXTRA_TESTS/${s#extra/}.c does not build with dtlab's reference (above)" >&2
            exit 1
        fi
        file=$src/$e/${e#*_}.c
        if [ "$SOLUTION" = 1 ]; then
            :
        elif [ ! -e "$file" ]; then
            built=0
            buildmsg="not graded: $file is missing"
        elif ! mk GRADE_SRC="$src" GRADE_OUT="$out" "$out/$s" >"$log" 2>&1; then
            # the compiler's words once, under the exercise's row; each case says why
            built=0
            buildmsg="not graded: $file does not build (the errors are above)"
            [ "$s" = "$e" ] && { echo "   $file does not build:"
                grep -E 'error|undefined reference' "$log" | head -n 8 | sed 's/^/   | /'
                } >>"$tmp/rows"
        elif [ "$s" = "$e" ] && grep -q 'warning:' "$log"; then
            { echo "   the compiler warns about $file (worth a look):"
              grep 'warning:' "$log" | head -n 4 | sed 's/^/   | /'; } >>"$tmp/rows"
        fi
        label="$e"
        [ "$s" != "$e" ] && label="$e (${s#extra/})"
        [ "$s" != "$e" ] && printf '   %s:\n' "hidden tests ${s#extra/}" >>"$tmp/rows"
        grade_suite "$label" "$ref/$s" "$out/$s" "$built" "$buildmsg"
        egot=$((egot + suite_got)); emax=$((emax + suite_max))
    done
    printf '%-44s %3d/%d\n' "$e" "$egot" "$emax"
    cat "$tmp/rows"
    total=$((total + egot)); max=$((max + emax))
done

{ echo "TAP version 13"; echo "# dtlab grader: $set_name"; echo "1..$ntap"
  cat "$tapbody"; echo "# total: $total/$max points"; } >"$TAP"
echo
echo "TAP report: $TAP"
echo "total: $total/$max points"
