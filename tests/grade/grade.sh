#!/usr/bin/env bash
# dtlab's grader: `make grade` runs it. It builds each exercise's suite against the code
# graded, runs the cases under mpiexec with time limits at every rank count, and prints
# a points table whose last line is "total: P/M points". A TAP report of the same
# results is written for course tooling.
#
# What a case must do to earn its points:
#   - pass at every rank count, each rank writing a positive verdict for it (grade.h's
#     gr_verdict, with a token only this run knows): an exit status alone counts for
#     nothing, so a program that stops early (exit(), a crash, a deadlock) fails the case;
#   - not call, from the learner's functions it uses, what the exercise asks the learner
#     to write (the suite's rules: grade.h's gr_rule, read from the object file);
#   - run clean under AddressSanitizer: a second program has the learner's file compiled
#     with it, and runs the pure cases and the run at one rank count (3 when it is
#     graded), so an access outside a buffer stops the case with ASan's first report.
# The cases run together, one mpiexec per rank count, each case's verdicts read apart;
# a run that dies is blamed on the case it was in, and the cases after it run again.
#
# Settings (make variables, passed here through the environment):
#   EX=NN           grade exercise NN only (or NN_topic); default: all of them
#   SOLUTION=1      grade dtlab's reference implementations (tests/grade/ref/)
#   WORK=DIR        grade the exercise files under DIR (DIR/NN_topic/topic.c) instead
#                   of exercises/: a submission's copy, for instance (any path)
#   EXTRA_TESTS=DIR add the suites DIR/NN_*.c (an instructor's hidden tests)
#   TAP=FILE        where the TAP report goes (default $BUILD/grade/results.tap)
#   HINTS=1         messages spell out the expected steps ("rank r sends chunk ...")
#   STRICT=1        exit status 1 when the total is below full marks (for a course's CI)
#   RULES=0         do not hold the learner's functions to the rules (SOLUTION=1 implies
#                   it: dtlab's answers call the library)
#   GRADE_RANKS     rank counts (default "1 2 3 4 5"); GRADE_TIMEOUT seconds per run
#                   (default 30); GRADE_WAIT seconds one wait for a message may take
#                   (default 5, dtlab's DT_TIMEOUT), after which dtlab names who waited
#                   for whom and the case counts as a probable deadlock
#   BUILD, CUDA, MPIEXEC  as for make
# Exit status: 0 when the grading ran (whatever the score, unless STRICT=1), 1 below
# full marks with STRICT=1 or when dtlab itself could not be built, 2 for bad settings.
set -u
shopt -s extglob
cd "$(dirname "$0")/../.." || exit 1

BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec}
EX=${EX:-}
SOLUTION=${SOLUTION:-0}
WORK=${WORK:-}
EXTRA_TESTS=${EXTRA_TESTS:-}
HINTS=${HINTS:-0}
STRICT=${STRICT:-0}
RULES=${RULES:-1}
GRADE_RANKS=${GRADE_RANKS:-1 2 3 4 5}
GRADE_TIMEOUT=${GRADE_TIMEOUT:-30}
GRADE_WAIT=${GRADE_WAIT:-5}
TAP=${TAP:-$BUILD/grade/results.tap}
MAKE=${MAKE:-make}

usage() {
    cat >&2 <<EOF
grade: $1
usage: make grade [EX=NN] [SOLUTION=1] [WORK=DIR] [EXTRA_TESTS=DIR] [TAP=FILE]
                  [HINTS=1] [STRICT=1] [RULES=0]
                  [GRADE_RANKS="1 2 3 4 5"] [GRADE_TIMEOUT=30] [GRADE_WAIT=5]
The exercises: $(cd exercises && echo [0-9][0-9]_*/ | tr -d /)
EOF
    exit 2
}

# ==== the settings ====

[ $# = 0 ] || usage "'$1': the settings are make variables, such as make grade EX=03"

for v in SOLUTION HINTS STRICT RULES; do
    case ${!v} in 0|1|'') ;; *) usage "$v is '${!v}'; it must be 0 or 1" ;; esac
done
[[ $GRADE_TIMEOUT =~ ^[1-9][0-9]{0,3}$ ]] ||
    usage "GRADE_TIMEOUT is '$GRADE_TIMEOUT'; it must be whole seconds, 1 to 9999"
[[ $GRADE_WAIT =~ ^[1-9][0-9]{0,3}$ ]] ||
    usage "GRADE_WAIT is '$GRADE_WAIT'; it must be whole seconds, 1 to 9999"
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
fi
[ "$SOLUTION" = 1 ] && RULES=0

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
# the rank count whose run has the learner's file under ASan: 3 when graded (chunks of
# two sizes, a folded rank), else the last; dtlab's answers are not run under it
asan=1
[ "$SOLUTION" = 1 ] && asan=""
asan_n=${GRADE_RANKS##* }
[[ " $GRADE_RANKS " == *" 3 "* ]] && asan_n=3

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtlab-grade.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
log=$tmp/log
[ ! -d "$TAP" ] || usage "TAP=$TAP is a folder; it names the report's file"
mkdir -p "$(dirname "$TAP")" 2>/dev/null || usage "TAP=$TAP: cannot make its folder"

# make sees no path of the learner's or the instructor's: the files are copied under
# BUILD first (only when changed, so nothing rebuilds needlessly), and make's rules name
# those copies. A path with spaces, quotes or '$' therefore works as any other.
# (a new copy is dated now, not as the file is: an older file that differs, unpacked
# from an archive or put back from .mine, must still be rebuilt)
copy_in() {   # copy_in FROM TO: TO becomes a copy of FROM, or goes when FROM is missing
    if [ ! -e "$1" ]; then
        rm -f "$2"
    elif ! cmp -s "$1" "$2"; then
        mkdir -p "$(dirname "$2")" && cp "$1" "$2"
    fi
}
extra=""
if [ -n "$EXTRA_TESTS" ]; then
    extra=$BUILD/grade/extra-src
    mkdir -p "$extra"
    for f in "$extra"/*.c; do      # suites no longer in EXTRA_TESTS go
        [ -e "$f" ] && [ ! -e "$EXTRA_TESTS/$(basename "$f")" ] && rm -f "$f"
    done
    for f in "$EXTRA_TESTS"/[0-9][0-9]_*.c; do
        [ -e "$f" ] && copy_in "$f" "$extra/$(basename "$f")"
    done
fi

# CUDA as the library was built (make passes it), so the configuration stays the same
mk() { $MAKE --no-print-directory -s BUILD="$BUILD" ${CUDA:+CUDA=$CUDA} EXTRA_TESTS="$extra" "$@"; }

# ==== what the learner's functions call ====

# calls OBJ: "function name" lines, every name each function defined in OBJ calls or
# takes the address of (the file's own functions too), itself or through what it
# reaches in OBJ: the static functions
# it calls, the variables it reads (a table of function pointers too). OBJ is built at
# -O0 with a section per function and per variable (the Makefile's calls rule), so
# each one's relocations are its own and no helper is inlined away.
calls() {
    { nm -P --defined-only "$1" | awk '$2 ~ /^[TtDdBbRr]$/ { print "def", $1, $2 }'
      readelf -rW "$1" | awk '
        function node(s) {      # ".text.f" or ".data.rel.local.t" -> "f", "t"
            sub(/^\.(text|data\.rel\.ro\.local|data\.rel\.ro|data\.rel\.local|data\.rel|data|rodata|bss)\./, "", s)
            return s ~ /^\./ ? "" : s
        }
        /^Relocation section/ { s = $3; gsub(/\047/, "", s); sub(/^\.rela/, "", s)
                                f = node(s); next }
        f != "" && $1 ~ /^[0-9a-f]+$/ && NF >= 5 { n = node($5); if (n != "") print "ref", f, n }'
    } | awk '
        $1 == "def" { def[$2] = 1; if ($3 ~ /[Tt]/) fn[$2] = 1; next }
        { edge[$2] = edge[$2] " " $3 }
        function visit(f, g,   k, m, parts) {
            if ((g SUBSEP f) in seen) return
            seen[g, f] = 1
            if (f != g && (f in fn)) print g, f       # a function of the file it reaches
            m = split(edge[f], parts, " ")
            for (k = 1; k <= m; k++)
                if (parts[k] in def) visit(parts[k], g)
                else if (!((g SUBSEP parts[k]) in out)) { out[g, parts[k]] = 1; print g, parts[k] }
        }
        END { for (f in fn) visit(f, f) }'
}

# broken_rules BIN OBJ: "function<TAB>message" for each of the suite's rules (BIN
# --rules) that a function of the learner's file breaks (what it calls: $tmp/calls), the
# first name only; "*" for what breaks every case.
broken_rules() {
    local kind fn re why name
    # every exercise's rules: a name looked up at run time is a call the grader cannot
    # see; and an exercise's code touches no files, descriptors, processes, threads,
    # signals or environment (which could rewrite the verdicts the program writes)
    local sandbox='dup|dup2|dup3|pipe|pipe2|syscall|fork|vfork|clone|clone3|pthread_create|exec[lv]p?e?|execvpe|fexecve|posix_spawnp?|system|popen|open|open64|openat|openat64|creat|creat64|fopen|fopen64|freopen|freopen64|fdopen|fclose|close|socket|mmap|mmap64|mprotect|ptrace|signal|sigaction|raise|kill|setenv|putenv|unsetenv|clearenv|write|writev|pwrite|pwrite64|setvbuf|setbuf'
    while read -r fn name; do
        [[ $fn == ex_* ]] || continue
        if [[ $name =~ ^(dlsym|dlvsym|dlopen)$ ]]; then
            printf '%s\t%s calls %s: a function looked up by name at run time is hidden from the grader; call what you need by its name\n' "$fn" "$fn" "$name"
        elif [[ $name =~ ^($sandbox)$ ]]; then
            printf '%s\t%s calls %s: an exercise'"'"'s code touches no files, descriptors, processes, threads, signals or environment (to debug, print with printf or fprintf(stderr, ...))\n' "$fn" "$fn" "$name"
        fi
    done <"$tmp/calls"
    # code that runs before or after main (a constructor or destructor) runs unasked
    if readelf -SW "$2" | grep -qE ' \.(init_array|preinit_array|ctors|fini_array|dtors)'; then
        printf '*\tthe file runs code of its own before or after main (a constructor or a destructor): an exercise'"'"'s code runs only when the tests call it\n'
    fi
    while IFS=$'\t' read -r kind fn re why; do
        [ "$kind" = rule ] || continue
        name=$(awk -v f="$fn" '$1 == f { print $2 }' "$tmp/calls" | grep -E -m1 -x -- "$re")
        [ -n "$name" ] && printf '%s\t%s calls %s: %s\n' "$fn" "$fn" "$name" "$why"
    done < <("$1" --rules)
}

# ==== running the cases ====

token=$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')

# One run of some cases at n ranks: every case gets the grader's token, the deadline
# for one wait (DT_TIMEOUT), ASan's settings, and the hints setting; the exercises work
# on host memory, so the ranks take no GPU (DT_DEVICE=cpu). Every message goes through
# MPI (DT_P2P=staging): a send of more than MPI's eager limit then waits for its
# receive, as MPI allows any send to, so an order that can deadlock does. (Through a
# mailbox a send of up to 2 MiB returns at once, and two partners that both send first
# would get away with it.)
run_cases() {   # run_cases BIN N CASES(comma-separated)
    GRADE_TOKEN=$token GRADE_HINTS=$HINTS DT_TIMEOUT=$GRADE_WAIT MPIEXEC_TIMEOUT=$GRADE_TIMEOUT \
    DT_DEVICE=cpu DT_P2P=staging \
    ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:protect_shadow_gap=0:verify_asan_link_order=0 \
        timeout -k 5 $((GRADE_TIMEOUT + 10)) $MPIEXEC -n "$2" "$1" --case "$3" \
        >"$log" 2>&1 </dev/null
}

# died N KIND CASE RC: why the run at N ranks ended inside CASE without every rank's
# verdict; sets verdict.
died() {
    local n=$1 kind=$2 rc=$4 at="at $1 ranks, " why who
    [ "$n" = 1 ] && at="at 1 rank, "
    [ "$kind" = pure ] && at=""
    if why=$(grep -o -m1 'ex_[A-Za-z0-9_]* is not implemented yet' "$log"); then
        verdict="$why (TODO(exercise) left)"
    elif why=$(grep -o -m1 'ERROR: AddressSanitizer: .*' "$log"); then
        # the report's kind, the first frame in the learner's file, and where the memory was
        local frame region alloc
        # "    #2 0x4f1a in ex_f /path/f.c:38" -> "ex_f (f.c:38)": the first learner frame
        asan_frame() {
            grep -E -m1 '^ +#[0-9]+ 0x[0-9a-f]+ in ex_[A-Za-z0-9_]* ' |
                sed -E 's/^ +#[0-9]+ 0x[0-9a-f]+ in //; s/ [^ ]*\/([^/ ]+:[0-9]+)(:[0-9]+)?$/ (\1)/'
        }
        frame=$(asan_frame <"$log")
        alloc=$(sed -n '/allocated by thread/,$p' "$log" | asan_frame)
        region=$(grep -m1 -oE 'is located .* (region|of global|stack of)[^[]*' "$log" |
                 sed -E 's/^is located //; s/ region ?$/ block/; s/ of ([0-9]+-byte)/ of a \1/')
        why=${why#ERROR: }; why=${why%% on address*}
        verdict="${at}a memory error: $why$(grep -o -m1 -E '(READ|WRITE) of size [0-9]+' "$log" |
                 sed 's/^/, a /')${frame:+ in $frame}${region:+, $region}${alloc:+ allocated in $alloc} (the rerun command shows ASan's whole report)"
    elif who=$(grep -E -m1 '^dtlab: rank [0-9]+: .*waited [0-9.]+ s for ' "$log"); then
        who=${who#dtlab: }; who=${who%% [[]*}
        [[ $who =~ ^(rank\ [0-9]+:)\ [^\ ]+:[0-9]+:\ (.*)$ ]] &&
            who="${BASH_REMATCH[1]} ${BASH_REMATCH[2]}"      # no lib/p2p.c:NNN
        verdict="${at}probable deadlock: dtlab stopped the job: $who.${deadlock:+ ${deadlock^}}"
    elif [ "$rc" = 124 ] || [ "$rc" = 137 ] || grep -q 'APPLICATION TIMED OUT' "$log"; then
        if [ "$kind" = pure ]; then
            verdict="no end after $GRADE_TIMEOUT s: an endless loop?"
        else
            verdict="${at}no end after $GRADE_TIMEOUT s, and no rank was waiting in dtlab's p2p: an endless loop, or a wait inside an MPI call of your own?${deadlock:+ ${deadlock^}}"
        fi
    elif why=$(grep -o -m1 'rank [0-9]*: crashed with signal .*' "$log"); then
        verdict="$at$why"
    elif why=$(grep -m1 -oE '^dtlab: rank [0-9]+: the program exited \(status [0-9]+\)' "$log"); then
        why=${why#dtlab: }; why=${why/: the program exited/ exited}
        verdict="${at}it ended early: $why in the middle of the case, before its checks were done (and before dt_finalize)$exits"
    elif why=$(grep -m1 '^dtlab: rank ' "$log"); then
        why=${why#dtlab: }
        [[ $why =~ ^(rank\ [0-9]+:)\ [^\ ]+:[0-9]+:\ (.*)$ ]] && why="${BASH_REMATCH[1]} ${BASH_REMATCH[2]}"
        verdict="${at}stopped by dtlab: $why"
        [[ $why == *"Message truncated"* ]] && verdict+=". A message came larger than the receive buffer: sender and receiver disagree on which chunk moves at this step, or on its size"
    elif why=$(grep -o -m1 'EXIT CODE: [0-9]*' "$log"); then
        verdict="${at}a rank ended abnormally ($why; $(grep -o -m1 'EXIT STRING: .*' "$log"))"
    else
        verdict="${at}it ended early (exit status $rc) with no verdict from rank(s) $(missing_ranks "$3" "$n"): the program stopped before the case's checks were done$exits"
    fi
}

# The ranks of 0..N-1 that wrote no verdict for CASE in the log, as "0, 2".
missing_ranks() {
    local r list=""
    for ((r = 0; r < $2; r++)); do
        grep -qE "@grade $token $1 $r $2 (pass|fail)" "$log" || list="$list${list:+, }$r"
    done
    echo "${list:-none}"
}

# grade_at BIN N NAMES...: runs the cases at N ranks; each case that fails gets its
# verdict in fail[NAME] and its rerun command in rerun[NAME]. Cases whose run died
# before their turn run again.
grade_at() {
    local bin=$1 n=$2 name rc ok msg gone at="at $2 ranks, "
    shift 2
    [ "$n" = 1 ] && at="at 1 rank, "
    local left=("$@") f
    while [ ${#left[@]} -gt 0 ]; do
        # a gap found unfilled stops every case that uses it: no need to run them
        local keep=()
        for name in "${left[@]}"; do
            for f in "${!gap[@]}"; do
                if [[ " ${reach[$name]:-$f} " == *" $f "* ]]; then
                    fail[$name]=${gap[$f]}
                    rerun[$name]=${gaprun[$f]/%--case *([^ ])/--case $name}
                    continue 2
                fi
            done
            keep+=("$name")
        done
        left=(${keep[@]+"${keep[@]}"})
        [ ${#left[@]} -gt 0 ] || break
        local list
        list=$(IFS=,; echo "${left[*]}")
        run_cases "$bin" "$n" "$list"
        rc=$?
        local next=()
        gone=""
        for name in "${left[@]}"; do
            if [ -n "$gone" ]; then
                next+=("$name")
                continue
            fi
            # (anywhere on a line: mpiexec may put another rank's unfinished line first)
            ok=$(grep -oE "@grade $token $name [0-9]+ $n pass\$" "$log" | sort -u | wc -l)
            msg=$(grep -oE -m1 "@grade $token $name 0 $n fail.*" "$log")
            rerun[$name]="MPIEXEC_TIMEOUT=$GRADE_TIMEOUT DT_TIMEOUT=$GRADE_WAIT DT_DEVICE=cpu DT_P2P=staging${hintvar} $MPIEXEC -n $n $(printf %q "$bin") --case $name"
            if [ "$ok" = "$n" ]; then
                continue
            elif [ -n "$msg" ]; then
                msg=${msg#@grade $token $name 0 $n fail}; msg=${msg# }
                # "K failed check(s) over N ranks; the first, on rank R: msg" -> "rank R: msg"
                msg=$(printf '%s' "$msg" | sed -E 's/^[0-9]+ failed check\(s\) over [0-9]+ ranks; the first, on (rank [0-9]+): /\1: /')
                if [ "${kind[$name]}" = pure ]; then
                    fail[$name]=${msg#rank 0: }
                else
                    fail[$name]="$at$msg"
                fi
            else
                died "$n" "${kind[$name]}" "$name" "$rc"
                # a crash without ASan: the same case again under ASan, whose report
                # says more (where, what size, whose memory) when memory is the cause
                if [ "$bin" != "$asan_cur" ] &&
                   [[ $verdict =~ crashed\ with\ signal|killed\ by\ SIG|ended\ abnormally ]]; then
                    local crash=$verdict
                    cp "$log" "$tmp/crash.log"
                    run_cases "$asan_cur" "$n" "$name"
                    if grep -q 'ERROR: AddressSanitizer: ' "$log"; then
                        died "$n" "${kind[$name]}" "$name" 1
                        rerun[$name]="MPIEXEC_TIMEOUT=$GRADE_TIMEOUT DT_TIMEOUT=$GRADE_WAIT DT_DEVICE=cpu DT_P2P=staging${hintvar} $MPIEXEC -n $n $(printf %q "$asan_cur") --case $name"
                    else
                        verdict=$crash
                    fi
                    cp "$tmp/crash.log" "$log"
                fi
                # a run on another communicator that dies where MPI_COMM_WORLD's pass
                if [[ $name == *comm* ]] && [[ $verdict != *"not implemented"* ]]; then
                    local other world_ok=1
                    for other in "${!kind[@]}"; do
                        [[ $other == *comm* ]] || [ -z "${fail[$other]:-}" ] || world_ok=0
                    done
                    [ "$world_ok" = 1 ] && verdict+=". This case runs on communicators other than MPI_COMM_WORLD, where the other cases pass: are every rank and size taken from comm?"
                fi
                fail[$name]=$verdict
                gone=1
                if [[ $verdict =~ ^(ex_[A-Za-z0-9_]*)\ is\ not\ implemented ]]; then
                    gap[${BASH_REMATCH[1]}]=$verdict
                    gaprun[${BASH_REMATCH[1]}]=${rerun[$name]}
                fi
            fi
        done
        left=(${next[@]+"${next[@]}"})
    done
}

# ==== grading ====

# The compiler's lines, indented, naming the learner's file where they name its copy.
as_learner() {
    local l
    while IFS= read -r l; do
        printf '   | %s\n' "${l//"$out/src/"/"$src/"}"
    done
}

total=0
max=0
ntap=0
tapbody=$tmp/tap
: >"$tapbody"
hintvar=""
[ "$HINTS" = 1 ] && hintvar=" GRADE_HINTS=1"

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

echo "Grading $set_name at ${GRADE_RANKS// /, } ranks, at most $GRADE_TIMEOUT s a run and $GRADE_WAIT s a wait."
echo

# grade_suite LABEL REFBIN BIN BUILT BUILDMSG OBJ RULESBIN ASANBIN: grades every case of
# one suite; the rules and the deadlock hint are the exercise's own (RULESBIN --rules),
# for an instructor's hidden suite too; ASANBIN runs the pure cases and rank count asan_n
grade_suite() {
    local label=$1 refbin=$2 bin=$3 built=$4 buildmsg=$5 obj=$6 rulesbin=$7 asanbin=$8
    local name pts k what use n got=0 sum=0 f
    declare -gA fail=() rerun=() kind=() reach=() gap=() gaprun=()
    local names=() pure=() mpi=()
    deadlock=$("$rulesbin" --rules | awk -F '\t' '$1 == "deadlock" { print $2; exit }')
    # the rules first: a case whose functions call what they should implement is not run
    local broken=""
    : >"$tmp/calls"
    [ "$built" = 1 ] && [ "$SOLUTION" != 1 ] && calls "$obj" >"$tmp/calls"
    [ "$RULES" = 1 ] && [ "$built" = 1 ] && broken=$(broken_rules "$rulesbin" "$obj")
    exits=""
    [ "$built" = 1 ] && [ "$SOLUTION" != 1 ] && nm -u "$obj" 2>/dev/null |
        grep -qwE '_?_?exit|_Exit|quick_exit|abort' && exits=" (your file calls exit() or abort())"
    while IFS=$'\t' read -r name pts k what use; do
        [ -n "$name" ] || continue
        names+=("$name")
        kind[$name]=$k
        [ "$use" = - ] && use=""
        # the learner's functions the case runs, and those they call ("" : all)
        reach[$name]=""
        for f in $use; do
            reach[$name]+=" $f $(awk -v f="$f" '$1 == f && $2 ~ /^ex_/ { printf "%s ", $2 }' \
                                "$tmp/calls" 2>/dev/null)"
        done
        sum=$((sum + pts))
        if [ "$built" = 0 ]; then
            fail[$name]=$buildmsg
            continue
        fi
        while IFS=$'\t' read -r f msg; do
            [ -n "$f" ] || continue
            if [ -z "$use" ] || [ "$f" = "*" ] || [[ " $use " == *" $f "* ]]; then
                fail[$name]="not run: $msg"
                break
            fi
        done <<<"$broken"
        [ -n "${fail[$name]:-}" ] && continue
        if [ "$k" = pure ]; then pure+=("$name"); else mpi+=("$name"); fi
    done < <("$refbin" --list)
    asan_cur=$asanbin
    [ ${#pure[@]} -gt 0 ] && grade_at "$asanbin" 1 "${pure[@]}"
    for n in $GRADE_RANKS; do
        local runbin=$bin
        [ "$n" = "$asan_n" ] && runbin=$asanbin
        local alive=()
        for name in ${mpi[@]+"${mpi[@]}"}; do
            [ -z "${fail[$name]:-}" ] && alive+=("$name")
        done
        [ ${#alive[@]} -gt 0 ] && grade_at "$runbin" "$n" "${alive[@]}"
    done
    while IFS=$'\t' read -r name pts k what use; do
        [ -n "$name" ] || continue
        if [ -z "${fail[$name]:-}" ]; then
            got=$((got + pts))
            printf '   ok    %-18s %2d/%-2d %s\n' "$name" "$pts" "$pts" "$what" >>"$tmp/rows"
            tap 1 "$label $name ($pts points)"
        else
            printf '   FAIL  %-18s %2d/%-2d %s\n' "$name" 0 "$pts" "$what" >>"$tmp/rows"
            printf '         %s\n' "${fail[$name]}" | fold -s -w 88 | sed '2,$s/^/         /' >>"$tmp/rows"
            [ -n "${rerun[$name]:-}" ] && printf '         rerun: %s\n' "${rerun[$name]}" >>"$tmp/rows"
            tap 0 "$label $name ($pts points)" "${fail[$name]}" "${rerun[$name]:-}"
        fi
    done < <("$refbin" --list)
    suite_got=$got
    suite_max=$sum
}

# vet_extra BIN FILE: an instructor's hidden suite must pass against dtlab's answers at
# every rank count before it may take a learner's points; else the grading stops.
declare -A vetted=()
vet_extra() {
    local name pts k what use n ns bad=""
    local names=() pure=()
    while IFS=$'\t' read -r name pts k what use; do
        [ -n "$name" ] || continue
        if [ "$k" = pure ]; then pure+=("$name"); else names+=("$name"); fi
    done < <("$1" --list)
    for n in pure $GRADE_RANKS; do
        if [ "$n" = pure ]; then ns=(${pure[@]+"${pure[@]}"}); n=1; else ns=(${names[@]+"${names[@]}"}); fi
        [ ${#ns[@]} -gt 0 ] || continue
        run_cases "$1" "$n" "$(IFS=,; echo "${ns[*]}")"
        for name in "${ns[@]}"; do
            [ "$(grep -oE "@grade $token $name [0-9]+ $n pass\$" "$log" | sort -u | wc -l)" = "$n" ] ||
                { bad="$name at $n rank(s)"; break 2; }
        done
    done
    [ -z "$bad" ] && return 0
    tail -n 20 "$log" >&2
    echo "grade: the extra suite $2 fails against dtlab's own answers (case $bad; its output is above): fix the suite, or it would take points from every learner" >&2
    exit 1
}

# The reference programs list the cases even when the learner's file does not build.
jobs=-j$(nproc 2>/dev/null || echo 2)
if ! mk $jobs SOLUTION=1 "${exercises[@]/#/$ref/}" >"$log" 2>&1; then
    cat "$log" >&2
    echo "grade: dtlab's own grading programs do not build (above); nothing was graded" >&2
    exit 1
fi

# Every learner program built at once, in parallel (-k: past a file that does not build;
# each exercise's own make below then says why, or finds its program made). One
# exercise's programs are built by its own make below, in parallel too.
if [ "$SOLUTION" != 1 ]; then
    targets=()
    for e in "${exercises[@]}"; do
        copy_in "$src/$e/${e#*_}.c" "$out/src/$e/${e#*_}.c"
        [ -e "$out/src/$e/${e#*_}.c" ] &&
            targets+=("$out/$e" "$out/calls/$e.o" ${asan:+"$out/asan/$e"})
    done
    [ ${#targets[@]} -gt 0 ] && [ ${#exercises[@]} -gt 1 ] &&
        mk $jobs -k GRADE_SRC="$out/src" GRADE_OUT="$out" "${targets[@]}" >"$tmp/build.log" 2>&1
fi

for e in "${exercises[@]}"; do
    : >"$tmp/rows"
    egot=0; emax=0
    suites=("$e")
    if [ -n "$extra" ]; then
        for f in "$extra/${e%%_*}"_*.c; do
            [ -e "$f" ] && suites+=("extra/$(basename "$f" .c)")
        done
    fi
    file=$src/$e/${e#*_}.c
    for s in "${suites[@]}"; do
        built=1; buildmsg=""
        if [ "$s" != "$e" ] && ! mk SOLUTION=1 "$ref/$s" >"$log" 2>&1; then
            cat "$log" >&2
            echo "grade: the extra suite $EXTRA_TESTS/${s#extra/}.c does not build with dtlab's reference (above)" >&2
            exit 1
        fi
        [ "$s" != "$e" ] && [ -z "${vetted[$s]:-}" ] && vet_extra "$ref/$s" "$EXTRA_TESTS/${s#extra/}.c" &&
            vetted[$s]=1
        if [ "$SOLUTION" = 1 ]; then
            :
        elif [ ! -e "$file" ]; then
            built=0
            buildmsg="not graded: $file is missing"
        elif ! mk $jobs GRADE_SRC="$out/src" GRADE_OUT="$out" "$out/$s" "$out/calls/$e.o" \
                  ${asan:+"$out/asan/$e"} >"$log" 2>&1; then
            # the compiler's words once, under the exercise's row; each case says why
            built=0
            buildmsg="not graded: $file does not build (the errors are above)"
            [ "$s" = "$e" ] && { echo "   $file does not build:"
                grep -E 'error|undefined reference|No rule' "$log" | awk '!seen[$0]++' | head -n 8 |
                    as_learner
                } >>"$tmp/rows"
        elif [ "$s" = "$e" ] && cat "$log" "$tmp/build.log" 2>/dev/null |
                 grep -F "$out/src/$e/" | grep -q 'warning:'; then
            { echo "   the compiler warns about $file (worth a look):"
              cat "$log" "$tmp/build.log" | grep -F "$out/src/$e/" | grep 'warning:' |
                  awk '!seen[$0]++' | head -n 4 | as_learner; } >>"$tmp/rows"
        fi
        label="$e"
        [ "$s" != "$e" ] && label="$e (${s#extra/})"
        [ "$s" != "$e" ] && printf '   %s:\n' "hidden tests ${s#extra/}" >>"$tmp/rows"
        asanbin=$out/$s
        [ -n "$asan" ] && [ "$s" = "$e" ] && asanbin=$out/asan/$e
        grade_suite "$label" "$ref/$s" "$out/$s" "$built" "$buildmsg" "$out/calls/$e.o" "$ref/$e" \
            "$asanbin"
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
if [ "$STRICT" = 1 ] && [ "$total" != "$max" ]; then
    echo "grade: below full marks (STRICT=1): exit status 1" >&2
    exit 1
fi
exit 0
