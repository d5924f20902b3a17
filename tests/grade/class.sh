#!/usr/bin/env bash
# make grade-class SUBMISSIONS=DIR: a whole class graded at once. Each folder DIR/NAME/
# is a student's, holding NN_topic/topic.c for the exercises they hand in (the layout of
# exercises/). Each student's exercise is graded in turn by tests/grade/grade.sh, on a
# copy of that one file, with limits, into
#
#   CLASS_OUT/results.csv   student, exercise, points, max, first failure, identical to
#                           (one row per student and exercise; "first failure" is the
#                           first case lost and the grader's message, or why nothing was
#                           graded: missing, does not build, timed out)
#   CLASS_OUT/summary.txt   per exercise: students, full marks, mean, median, missing,
#                           not building, timed out; the identical submissions; the time
#   CLASS_OUT/identical.txt each group of files identical after removing comments and
#                           whitespace, the first two side by side (diff -y)
#   CLASS_OUT/logs/         the grader's table for each student and exercise
#
# A student cannot stop the others nor touch their files:
#   - only DIR/NAME/NN_topic/topic.c is read, when it is a plain file (not a link) of at
#     most 1 MiB, and copied into a folder of its own that is graded and then removed;
#     DIR is never written;
#   - each grading runs under timeout(1): CLASS_TIMEOUT seconds a student's exercise
#     (default 300; a correct answer takes 2-8 s on 2 cores, and the grader's own limits,
#     GRADE_TIMEOUT and GRADE_WAIT, stop a hang within each run); every process of it
#     carries a token of its own in its environment (DTLAB_CLASS_RUN), which mpiexec
#     hands on to the ranks, so whatever is left of it afterwards (ranks whose mpiexec
#     was killed, in sessions of hydra's own) is found and killed;
#   - ulimit -u: at most CLASS_PROCS processes more than the user has (default 256),
#     against fork bombs (the kernel does not hold root to it; the grader's rules refuse
#     a file that calls fork, exec, system or clone whoever runs it); ulimit -f: no file
#     written over CLASS_FILE_MB MiB (default 256: a program that prints without end);
#   - memory: the learner's program runs under AddressSanitizer, which reserves terabytes
#     of address space for its shadow, so ulimit -v would stop every run; instead each
#     rank is held to CLASS_MEM_MB MiB (default 2048) by ASan itself (hard_rss_limit_mb,
#     max_allocation_size_mb, through an mpiexec wrapper that adds them to ASan's options).
#
# Settings (environment; make passes them): SUBMISSIONS (required), EX (exercises; default
# every exercise some student hands in), CLASS_OUT (default $BUILD/grade/class),
# CLASS_TIMEOUT, CLASS_PROCS, CLASS_FILE_MB, CLASS_MEM_MB, and the grader's GRADE_RANKS,
# GRADE_TIMEOUT, GRADE_WAIT, HINTS, RULES, EXTRA_TESTS; BUILD, CUDA, MPIEXEC as for make.
# Exit status 0 when every student was graded (whatever the scores), 2 for bad settings,
# 1 when dtlab's own grading programs do not build.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec}
SUBMISSIONS=${SUBMISSIONS:-}
EX=${EX:-}
CLASS_OUT=${CLASS_OUT:-$BUILD/grade/class}
CLASS_TIMEOUT=${CLASS_TIMEOUT:-300}
CLASS_PROCS=${CLASS_PROCS:-256}
CLASS_FILE_MB=${CLASS_FILE_MB:-256}
CLASS_MEM_MB=${CLASS_MEM_MB:-2048}
export GRADE_RANKS GRADE_TIMEOUT GRADE_WAIT HINTS RULES EXTRA_TESTS   # (those set)

usage() {
    echo "grade-class: $1" >&2
    echo "usage: make grade-class SUBMISSIONS=DIR [EX=NN] [CLASS_OUT=DIR] [CLASS_TIMEOUT=300]" \
        "[CLASS_PROCS=256] [CLASS_FILE_MB=256] [CLASS_MEM_MB=2048]" >&2
    exit 2
}
[ -n "$SUBMISSIONS" ] || usage "SUBMISSIONS is not set: the folder with a folder per student"
[ -d "$SUBMISSIONS" ] || usage "SUBMISSIONS=$SUBMISSIONS is not a directory"
for v in CLASS_TIMEOUT CLASS_PROCS CLASS_FILE_MB CLASS_MEM_MB; do
    [[ ${!v} =~ ^[1-9][0-9]{0,5}$ ]] || usage "$v is '${!v}'; it must be a whole number"
done
command -v python3 >/dev/null || usage "python3 is needed (the CSV and the comparison)"
SUBMISSIONS=$(cd "$SUBMISSIONS" && pwd) || exit 2

# the exercises: EX, else those some student hands in
all=()
for d in exercises/[0-9][0-9]_*/; do all+=("$(basename "$d")"); done
want=()
if [ -n "$EX" ]; then
    read -ra asked <<<"${EX//,/ }"
    for x in "${asked[@]}"; do
        [[ $x =~ ^[0-9]$ ]] && x=0$x
        found=0
        for e in "${all[@]}"; do
            if [ "$x" = "$e" ] || [ "$x" = "${e%%_*}" ]; then want+=("$e"); found=1; fi
        done
        [ "$found" = 1 ] || usage "there is no exercise '$x'"
    done
else
    for e in "${all[@]}"; do
        ls -d "$SUBMISSIONS"/*/"$e" >/dev/null 2>&1 && want+=("$e")
    done
    [ ${#want[@]} -gt 0 ] || usage "no student folder of $SUBMISSIONS holds an exercise folder (NAME/NN_topic/topic.c)"
fi

# sweep TOKEN: kills every process whose environment holds DTLAB_CLASS_RUN=TOKEN (the
# processes of one grading, started here)
sweep() {
    local pids
    pids=$(grep -lzx "DTLAB_CLASS_RUN=$1" /proc/[0-9]*/environ 2>/dev/null |
           sed 's|^/proc/\([0-9]*\)/environ$|\1|' | tr '\n' ' ')
    [ -n "${pids// /}" ] && kill -9 $pids 2>/dev/null
    return 0
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtlab-class.XXXXXX") || exit 1
token=""
trap 'rm -rf "$tmp"' EXIT
trap '[ -n "$token" ] && sweep "$token"; exit 130' INT TERM
mkdir -p "$CLASS_OUT/logs" "$tmp/rec" || exit 1
rm -f "$CLASS_OUT"/logs/*.txt

# dtlab's grading programs, built once (each grading after this finds them made)
if ! make --no-print-directory -s BUILD="$BUILD" ${CUDA:+CUDA=$CUDA} SOLUTION=1 \
        "${want[@]/#/$BUILD/grade/solution/}" >"$tmp/build.log" 2>&1; then
    cat "$tmp/build.log" >&2
    echo "grade-class: dtlab's own grading programs do not build (above)" >&2
    exit 1
fi
for e in "${want[@]}"; do
    "$BUILD/grade/solution/$e" --list | awk -F '\t' -v e="$e" '{ m += $2 } END { print e "\t" m }'
done >"$tmp/max.tsv"

# every rank's ASan held to CLASS_MEM_MB (see above); grade.sh sets ASAN_OPTIONS itself
cat >"$tmp/mpiexec" <<EOF
#!/usr/bin/env bash
ASAN_OPTIONS="\${ASAN_OPTIONS:-}:hard_rss_limit_mb=$CLASS_MEM_MB:max_allocation_size_mb=$CLASS_MEM_MB" \\
    exec $(printf %q "$MPIEXEC") "\$@"
EOF
chmod +x "$tmp/mpiexec"

students=()
for d in "$SUBMISSIONS"/*/; do
    [ -d "$d" ] && [ ! -L "${d%/}" ] && students+=("$(basename "$d")")
done
[ ${#students[@]} -gt 0 ] || usage "$SUBMISSIONS holds no student folder"
echo "Grading ${#students[@]} students on ${want[*]}, at most $CLASS_TIMEOUT s a student's exercise."

t0=$SECONDS
copy=$tmp/student     # (one path for all: the grader's build of it is reused where
i=0                   #  a file is the same as the one before, and rebuilt where not)
for s in "${students[@]}"; do
    i=$((i + 1))
    printf '%s' "$s" >"$tmp/rec/$i.name"
    safe=$(printf '%s' "$s" | tr -c 'A-Za-z0-9._-' _)
    line=""
    for e in "${want[@]}"; do
        f=$SUBMISSIONS/$s/$e/${e#*_}.c
        rm -rf "$copy" && mkdir -p "$copy/$e"
        note=""
        if [ -L "$f" ]; then
            note="not graded: $e/${e#*_}.c is a symbolic link"
        elif [ -f "$f" ] && [ "$(wc -c <"$f")" -gt 1048576 ]; then
            note="not graded: $e/${e#*_}.c is larger than 1 MiB"
        elif [ -f "$f" ]; then
            cp "$f" "$copy/$e/"
        fi
        id=$i.${e%%_*}
        printf '%s' "$note" >"$tmp/rec/$id.note"
        t1=$SECONDS
        token=$(od -An -tx1 -N8 /dev/urandom | tr -d ' \n')
        DTLAB_CLASS_RUN=$token bash -c '
            ulimit -u $(( $(ps -o pid= -u "$(id -u)" | wc -l) + $1 )) 2>/dev/null
            ulimit -f $(( $2 * 1024 ))
            shift 2
            exec "$@"' _ "$CLASS_PROCS" "$CLASS_FILE_MB" \
            timeout -k 5 "$CLASS_TIMEOUT" env BUILD="$BUILD" ${CUDA:+CUDA=$CUDA} \
            MPIEXEC="$tmp/mpiexec" WORK="$copy" EX="$e" GRADE_RESULTS="$tmp/rec/$id.tsv" \
            TAP="$tmp/rec/$id.tap" bash tests/grade/grade.sh \
            >"$CLASS_OUT/logs/$(printf %03d "$i")-$safe-$e.txt" 2>&1 </dev/null &
        wait $!
        rc=$?
        echo $rc >"$tmp/rec/$id.rc"
        echo $((SECONDS - t1)) >"$tmp/rec/$id.secs"
        # what a grading cut short left running (a grading that ends by itself has
        # waited for its runs)
        [ "$rc" = 0 ] || sweep "$token"
        token=""
        rm -rf "$copy"
        case $rc in
            0) line+=$(awk -F '\t' '$1 == "exercise" { printf "  %s %d/%d", $2, $3, $4 }' \
                       "$tmp/rec/$id.tsv" 2>/dev/null) ;;
            124|137) line+="  $e timed out" ;;
            *) line+="  $e not graded (exit $rc)" ;;
        esac
    done
    printf '  %-24s%s\n' "$s" "$line"
done

# a stub as dtlab ships it is nobody's copy: its comparison is left out
mkdir -p "$tmp/stubs"
for e in "${want[@]}"; do
    git show "HEAD:exercises/$e/${e#*_}.c" >"$tmp/stubs/$e.c" 2>/dev/null ||
        cp "exercises/$e/${e#*_}.c" "$tmp/stubs/$e.c" 2>/dev/null
done
python3 tests/grade/class.py --records "$tmp/rec" --max "$tmp/max.tsv" --stubs "$tmp/stubs" \
    --submissions "$SUBMISSIONS" --out "$CLASS_OUT" --timeout "$CLASS_TIMEOUT" \
    --seconds $((SECONDS - t0)) --exercises "${want[@]}"
