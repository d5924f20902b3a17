#!/usr/bin/env bash
# dtlab's grader: `make grade` runs it. It builds each exercise's suite against the code
# graded, runs the cases under mpiexec with time limits at every rank count, and prints
# a points table whose last line is "total: P/M points". A TAP report of the same
# results is written for course tooling.
#
# What a case must do to earn its points:
#   - pass at every rank count, each rank writing a positive verdict for it, once, into a
#     file this script names for the run (grade.h's gr_verdict): an exit status or a
#     printed line counts for nothing, so a program that stops early (exit(), a crash, a
#     deadlock) fails the case, and a second verdict of one rank is tampering;
#   - come from a file that holds plain C calling only what an exercise may, and whose
#     functions, through anything they call down libdt.a, do not call what the exercise
#     asks the learner to write (the suite's rules: grade.h's gr_rule), all read from the
#     object that runs (vet_file, broken_rules);
#   - run clean under AddressSanitizer: the learner's file is compiled once, with it, and
#     that program runs every case at every rank count.
# The cases run together, one mpiexec per rank count, each case's verdicts read apart;
# a run that dies is blamed on the case it was in, and the cases after it run again.
#
# Settings (make variables, passed here through the environment):
#   EX=NN           grade exercise NN only (or NN_topic; several: EX="02 05"); default:
#                   all of them
#   SOLUTION=1      grade dtlab's reference implementations (tests/grade/ref/)
#   WORK=DIR        grade the exercise files under DIR (DIR/NN_topic/topic.c) instead
#                   of exercises/: a submission's copy, for instance (any path)
#   EXTRA_TESTS=DIR add the suites DIR/NN_*.c (an instructor's hidden tests)
#   TAP=FILE        where the TAP report goes (default $BUILD/grade/results.tap)
#   GRADE_RESULTS=FILE  also write the results there, one line a record, fields
#                   separated by tabs (a tab or line end inside a field becomes a space),
#                   for course tooling (tests/grade/gradescope/, tests/grade/class.sh):
#                     case EXERCISE SUITE NAME POINTS MAX ok|fail WHAT MESSAGE RERUN
#                     exercise EXERCISE POINTS MAX graded|missing|nobuild FILE
#                     total POINTS MAX                  (last: the grading ended)
#                   SUITE is EXERCISE, or extra/NN_name for a hidden suite
#   HINTS=1         messages spell out the expected steps ("rank r sends chunk ...")
#   STRICT=1        exit status 1 when the total is below full marks (for a course's CI)
#   RULES=0         do not hold the learner's functions to the rules (SOLUTION=1 implies
#                   it: dtlab's answers call the library)
#   GRADE_RANKS     rank counts (default "1 2 3 4 5", and the exercise's own past 5: its
#                   suite's --rules); GRADE_TIMEOUT seconds per run
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
ranks_set=0
[ -n "${GRADE_RANKS:-}" ] && ranks_set=1
GRADE_RANKS=${GRADE_RANKS:-1 2 3 4 5}
GRADE_TIMEOUT=${GRADE_TIMEOUT:-30}
GRADE_WAIT=${GRADE_WAIT:-5}
TAP=${TAP:-$BUILD/grade/results.tap}
MAKE=${MAKE:-make}
GRADE_RESULTS=${GRADE_RESULTS:-}

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

all=()
for d in exercises/[0-9][0-9]_*/; do
    d=${d%/}
    all+=("${d#exercises/}")
done
# EX: one exercise or several, "02 05" or 02,05 (EX=3 means 03), graded in their order
want=" "
read -ra asked <<<"${EX//,/ }"
for x in ${asked[@]+"${asked[@]}"}; do
    [[ $x =~ ^[0-9]$ ]] && x=0$x
    found=0
    for e in "${all[@]}"; do
        if [ "$x" = "$e" ] || [ "$x" = "${e%%_*}" ]; then want+="$e "; found=1; fi
    done
    [ "$found" = 1 ] || usage "there is no exercise '$x'"
done
exercises=()
for e in "${all[@]}"; do
    if [ "$want" = " " ] || [[ $want == *" $e "* ]]; then exercises+=("$e"); fi
done

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
if [ -n "$GRADE_RESULTS" ]; then
    [ ! -d "$GRADE_RESULTS" ] || usage "GRADE_RESULTS=$GRADE_RESULTS is a folder; it names a file"
    { mkdir -p "$(dirname "$GRADE_RESULTS")" && : >"$GRADE_RESULTS"; } 2>/dev/null ||
        usage "GRADE_RESULTS=$GRADE_RESULTS: cannot write it"
fi
# results FIELD...: one record of GRADE_RESULTS's file (when it is set)
results() {
    [ -n "$GRADE_RESULTS" ] || return 0
    local f line=""
    for f in "$@"; do
        f=${f//$'\t'/ } f=${f//$'\n'/ }
        line+=$f$'\t'
    done
    printf '%s\n' "${line%$'\t'}" >>"$GRADE_RESULTS"
}

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

# The learner's object's symbols, as nm lists them ("ADDRESS TYPE NAME", and "TYPE NAME"
# for a name it uses without defining it), are read once for each exercise graded, into
# $tmp/syms (grade_suite): nm loads its plugins each time it starts.

# graph FILE [SYMS]: what each function and variable of FILE (an object, or an archive
# such as libdt.a) refers to, from its relocations (every file graded or linked is built
# with a section per function and per variable: the Makefile's CFLAGS): "def NAME" for
# each global function or variable FILE defines, then "FROM TO" for each reference. A
# name private to one object of an archive (a static function) is "object:name". SYMS:
# nm's list of FILE's symbols, when FILE is an object and nm has listed them already.
graph() {
    { if [ -n "${2:-}" ]; then
          awk 'NF == 3 { print "def", "-", $2, $3 }' "$2"
      else
          nm -A --defined-only "$1" 2>/dev/null |
              awk '{ k = split($1, p, ":"); print "def", (k >= 3 ? p[k - 1] : "-"), $2, $3 }'
      fi
      readelf -rW "$1" 2>/dev/null | awk '
        function node(s) {   # ".text.f", ".text.unlikely.f", ".data.rel.local.t" -> f, t
            if (!sub(/^\.text\.(unlikely|hot|startup|exit|split)\./, "", s))
                sub(/^\.(text|data\.rel\.ro\.local|data\.rel\.ro|data\.rel\.local|data\.rel|data|rodata|bss|tbss|tdata)\./, "", s)
            return s ~ /^\./ || s ~ /^(str[0-9.]+|cst[0-9]+)$/ ? "" : s
        }
        /^File: / { m = $2; sub(/^[^(]*\(/, "", m); sub(/\)$/, "", m); next }
        /^Relocation section/ { s = $3; gsub(/\047/, "", s); sub(/^\.rela/, "", s)
                                f = node(s); next }
        f != "" && $1 ~ /^[0-9a-f]+$/ && NF >= 5 {
            n = node($5); if (n != "") print "ref", (m == "" ? "-" : m), f, n }'
    } | awk '
        $1 == "def" { if ($3 ~ /^[tdbr]$/ && $2 != "-") own[$2 SUBSEP $4] = 1
                      else if ($3 ~ /^[TDBRiWV]$/) print "def", $4
                      next }
        { from = ($2 SUBSEP $3) in own ? $2 ":" $3 : $3
          to = ($2 SUBSEP $4) in own ? $2 ":" $4 : $4
          if (from != to) print from, to }'
}

# calls OBJ SYMS: "function name" lines, for each global function of OBJ (the learner's
# ex_ functions), every name it reaches in OBJ (its own helpers, the tables of function
# pointers it reads) and every name outside OBJ those call or take the address of. SYMS:
# nm's list of OBJ's symbols.
calls() {
    graph "$1" "$2" >"$tmp/graph"
    awk 'NF == 3 { print "own", $3, $2 }' "$2" |
        cat - "$tmp/graph" | awk '
        $1 == "own" { own[$2] = 1; if ($3 ~ /^[Tt]$/ && $2 ~ /^ex_/) fn[$2] = 1; next }
        $1 == "def" { next }
        { edge[$1] = edge[$1] " " $2 }
        function visit(f, g,   k, m, parts) {
            if ((g SUBSEP f) in seen) return
            seen[g, f] = 1
            if (f != g && f ~ /^ex_/) print g, f      # an exercise function it reaches
            m = split(edge[f], parts, " ")
            for (k = 1; k <= m; k++)
                if (parts[k] in own) visit(parts[k], g)
                else if (!((g SUBSEP parts[k]) in seen)) { seen[g, parts[k]] = 1; print g, parts[k] }
        }
        END { for (f in fn) visit(f, f) }'
}

# What an exercise's code may call besides its own functions, the other exercises' ex_
# functions and dtlab's (which the rules below sift): MPI, but not its files, its
# processes or its tool interface; from C's library, memory, strings, numbers, math,
# sorting and printing to stdout (printf, puts: never a FILE, stdout and stderr included,
# whose descriptor could be changed); and what the compiler and AddressSanitizer add.
# Nothing that opens, reads or writes files or descriptors, starts processes or
# threads, handles signals, reads the environment, or looks a function up by name.
libc_ok='exit|_Exit|abort|mem(cpy|move|set|cmp|chr)|str(len|nlen|cmp|ncmp|cpy|ncpy|cat|ncat|chr|rchr|str|spn|cspn|dup|ndup|tol|toul|toll|toull|tod|tof)|ato[ifl]|ll?abs|abs|l?l?div|(v?s?n?|v?)printf|puts|putchar|fflush|(m|c|re)alloc|free|aligned_alloc|posix_memalign|qsort|bsearch|__assert_fail|__stack_chk_fail|__errno_location|__ctype_(b|tolower|toupper)_loc|to(lower|upper)|__isoc99_sscanf|sscanf|__(mem(cpy|move|set)|str(n?cpy|n?cat)|v?s?n?printf)_chk'
libm_ok='(f?abs|sqrt|cbrt|pow|exp2?|expm1|log(2|10|1p)?|floor|ceil|l?l?round|trunc|fmod|remainder|fmin|fmax|fma|tanh|sinh|cosh|tan|sin|cos|atan2?|asin|acos|erfc?|hypot|ldexp|frexp|modf|nextafter|copysign|nan)[fl]?|__(u?(div|mod|mul)[dt]i3|(popcount|clz|ctz|ffs|parity|bswap)[ds]i2|mul[sdx]c3|div[sdx]c3|pow[isd]i2)'
san_ok='__asan_(report_[a-z0-9_]+|load[0-9N]+(_noabort)?|store[0-9N]+(_noabort)?|init|version_mismatch_check_v[0-9]+|(un)?register_globals|stack_(malloc|free)_[0-9]+|option_detect_stack_use_after_return|handle_no_return|mem(cpy|move|set)|alloca_poison|allocas_unpoison|set_shadow_[0-9a-f]+|(before|after)_dynamic_init|shadow_memory_dynamic_address)|__ubsan_handle_[a-z0-9_]+'
mpi_no='P?MPI_(File_[A-Za-z_]*|Comm_spawn[A-Za-z_]*|Comm_join|Comm_connect|Comm_accept|Open_port|Close_port|(Un)?[Pp]ublish_name|Lookup_name|T_[A-Za-z_]*|Register_datarep|Info_create_env|Pcontrol)'
# the functions of dtlab that reach one of these run processes or load code: never
escape='fork|vfork|clone|clone3|exec[lv]p?e?|execvpe|fexecve|posix_spawnp?|system|popen|dlopen|dlmopen|dlsym|dlvsym|MPI_Comm_spawn[A-Za-z_]*'

# The functions of dtlab an exercise may call: those its headers for point-to-point,
# schedules, buffers, reductions, collectives and lib/nn's layers declare, and dtlab's
# error checks (DT_CHECK_MPI, EX_TODO). Not the files, options and child jobs of
# programs (prog.h), traces (trace.h), the training engine (parallel/), nor internals.
lib_api() {
    grep -ohE '\b(dt|dti)_[A-Za-z0-9_]+[[:space:]]*\(' lib/errors.h lib/core.h lib/buf.h \
        lib/half.h lib/ops.h lib/p2p.h lib/schedule.h lib/collectives/collectives.h \
        lib/nn/nn.h | sed 's/[[:space:](]*$//' | sort -u
}

# lib_graph: $BUILD/grade/libdt.graph, libdt.a's graph (graph), made again when
# libdt.a is newer.
lib_graph() {
    local g=$BUILD/grade/libdt.graph
    if [ ! -s "$g" ] || [ "$BUILD/libdt.a" -nt "$g" ]; then
        # (gradings may run side by side: each writes a file of its own, then renames it)
        graph "$BUILD/libdt.a" >"$g.$$" && mv "$g.$$" "$g"
    fi
    echo "$g"
}

# vet_file OBJ COPY: "*<TAB>why" for what in the learner's file breaks every case, read
# from the file as compiled (OBJ, with OBJ's .i beside it: the preprocessed source, in
# which COPY, the file's path there, marks the learner's own lines):
#   - an #include of anything but a header of the system, of lib/ or of exercises/;
#   - inline assembly; an attribute other than a few harmless ones (no constructors,
#     sections, aliases, indirect functions, or sanitizers switched off); a #pragma;
#     builtins that walk the stack;
#   - in the object: code run before or after main, an indirect function (whose
#     resolver runs before main: in $tmp/syms, OBJ's symbols), a system call instruction.
vet_file() {
    local obj=$1 copy=$2 i=${1%.o}.i why
    if [ -f "$i" ]; then
        why=$(awk -v me="$copy" '
            function ident(s) { gsub(/^_+|_+$/, "", s); return s }
            /^# [0-9]+ "/ {
                f = $3; gsub(/"/, "", f)
                if (cur == me && $4 == "1" && f != me && !bad) {
                    sys = 0; for (k = 4; k <= NF; k++) if ($k == "3") sys = 1
                    if (f !~ /\.h$/ || (!sys && f !~ /^(\/usr\/include\/|\/usr\/lib\/gcc\/|lib\/|exercises\/)/) || f ~ /\.\./)
                        bad = "it includes " f ": an exercise'"'"'s file includes only headers of the system, of lib/ and of exercises/"
                }
                cur = f; next }
            cur != me { next }
            /^[ \t]*#[ \t]*pragma/ { if (!bad) bad = "it has a #pragma: " $0 "; an exercise'"'"'s file has none"; next }
            { t = $0; gsub(/"([^"\\]|\\.)*"/, "\"\"", t); gsub(/\047([^\047\\]|\\.)*\047/, "0", t); text = text " " t }
            END {
                if (bad) { print bad; exit }
                if (match(text, /(^|[^A-Za-z0-9_])(asm|__asm|__asm__)[^A-Za-z0-9_]/)) {
                    print "it has inline assembly (asm): an exercise is written in C"; exit }
                if (match(text, /__builtin_(frame_address|return_address|extract_return_addr|apply|apply_args|return|setjmp|longjmp|eh_return|unwind_init|dwarf_cfa|__clear_cache|init_trampoline|adjust_trampoline)/)) {
                    print "it uses " substr(text, RSTART, RLENGTH) ": an exercise'"'"'s code has no business with the stack or with code"; exit }
                if (match(text, /_Pragma/)) { print "it has a _Pragma: an exercise'"'"'s file has none"; exit }
                ok = " unused used maybe_unused noreturn format nonnull pure const noinline always_inline hot cold aligned packed fallthrough warn_unused_result deprecated returns_nonnull malloc alloc_size nothrow may_alias vector_size access "
                while (match(text, /__attribute(__)?[ \t]*\(\(/)) {
                    text = substr(text, RSTART + RLENGTH); depth = 2; item = ""
                    for (k = 1; k <= length(text) && depth > 0; k++) {
                        c = substr(text, k, 1)
                        if (c == "(") { depth++; if (depth == 3) { names = names " " ident(item); item = "#" } }
                        else if (c == ")") { depth--; if (depth == 1 && item != "#") names = names " " ident(item) }
                        else if (c == "," && depth == 2) { if (item != "#") names = names " " ident(item); item = "" }
                        else if (depth == 2 && item != "#" && c != " " && c != "\t") item = item c
                    }
                    text = substr(text, k)
                }
                m = split(names, nm, " ")
                for (k = 1; k <= m; k++)
                    if (nm[k] ~ /^(con|de)structor$/) {
                        print "it runs code of its own before or after main (__attribute__((" nm[k] "))): an exercise'"'"'s code runs only when the tests call it"; exit }
                    else if (nm[k] != "" && index(ok, " " nm[k] " ") == 0) {
                        print "it has __attribute__((" nm[k] ")): an exercise'"'"'s file may use only harmless attributes (unused, noreturn, format, aligned, ...), none that runs code unasked, moves it, or switches AddressSanitizer off"; exit }
            }' "$i")
        [ -n "$why" ] && printf '*\tyour file is not graded: %s\n' "$why"
    fi
    if awk '$2 == "i"' "$tmp/syms" | grep -q .; then
        printf '*\tyour file is not graded: it defines an indirect function (ifunc), whose resolver runs before main: an exercise'"'"'s code runs only when the tests call it\n'
    fi
    # code that runs before or after main: only AddressSanitizer's own start-up may
    if readelf -rW "$obj" | awk '/^Relocation section/ { s = $3; next }
            s ~ /(init_array|preinit_array|fini_array|ctors|dtors)/ && $1 ~ /^[0-9a-f]+$/ && NF >= 5 &&
            $5 !~ /^(\.text(\.startup|\.exit)?\.)?_sub_[ID]_[0-9]+_[0-9]+$/' | grep -q . ||
       readelf -SW "$obj" | grep -E ' \.(preinit_array|ctors|dtors)' | grep -q .; then
        printf '*\tyour file is not graded: it runs code of its own before or after main (a constructor or a destructor): an exercise'"'"'s code runs only when the tests call it\n'
    fi
    if objdump -d --no-show-raw-insn "$obj" 2>/dev/null | grep -qE '[[:space:]](syscall|sysenter|int[[:space:]]+\$0x80)([[:space:]]|$)'; then
        printf '*\tyour file is not graded: it makes system calls of its own: an exercise'"'"'s code reaches the system only through the functions it may call\n'
    fi
}

# broken_rules BIN OBJ COPY: "function<TAB>message" for each rule a function of the
# learner's file breaks, the first name only; "*" for what breaks every case (vet_file).
# What each function calls is in $tmp/calls (calls). A name the function reaches is
#   - the exercise's own forbidden name (the suite's rules, BIN --rules), or a function
#     of dtlab that reaches one, anywhere down its calls (read from libdt.a: the DDP
#     engine runs the ring allreduce, so calling it is calling the ring allreduce);
#   - or something an exercise may not call at all (libc_ok and the rest above).
broken_rules() {
    vet_file "$2" "$3"
    local lg
    lg=$(lib_graph)
    {   "$1" --rules | awk -F '\t' '$1 == "rule" { print "rule\t" $2 "\t" $3 "\t" $4 }'
        awk '{ print "call\t" $1 "\t" $2 }' "$tmp/calls"
        lib_api | sed 's/^/api\t/'
        cat "$lg"
    } | awk -F '\t' -v libc="^($libc_ok|$libm_ok|$san_ok)\$" -v mpino="^($mpi_no)\$" \
            -v escape="^($escape)\$" '
        $1 == "rule" { nr++; rfn[nr] = $2; rre[nr] = "^(" $3 ")$"; rwhy[nr] = $4; next }
        $1 == "call" { nc++; cfn[nc] = $2; cname[nc] = $3; next }
        $1 == "api" { api[$2] = 1; next }
        { split($0, w, " ")
          if (w[1] == "def") { lib[w[2]] = 1; next }
          edge[w[1]] = edge[w[1]] " " w[2] }
        # the first name reached from x, x included, that re matches ("" when none):
        # x itself, or a function of dtlab or MPI that x calls, anywhere down (the
        # library'"'"'s internals, dti_, do not count below x: dt_allgather may run its
        # ring, dti_ring_allgather, where an exercise may call dt_allgather)
        function reaches(x, re,   q, head, tail, seen2, parts, k, m, y, base) {
            head = 1; tail = 1; q[1] = x; seen2[x] = 1
            while (head <= tail) {
                y = q[head++]; base = y; sub(/^[^:]*:/, "", base)
                if (base ~ re && (y == x || base !~ /^dti_/)) return base
                m = split(edge[y], parts, " ")
                for (k = 1; k <= m; k++)
                    if (!(parts[k] in seen2)) { seen2[parts[k]] = 1; q[++tail] = parts[k] }
            }
            return ""
        }
        END {
            for (c = 1; c <= nc; c++) {
                f = cfn[c]; x = cname[c]
                if (f !~ /^ex_/ || (f SUBSEP "done") in said) continue
                if (x ~ /^ex_/) continue                       # its own, or of another exercise
                why = ""
                for (r = 1; r <= nr && why == ""; r++) {
                    if (rfn[r] != f) continue
                    if (x ~ rre[r]) why = f " calls " x ": " rwhy[r]
                    else if (x in lib && (y = reaches(x, rre[r])) != "")
                        why = f " calls " x ", which runs " y ": that is calling " y "; " rwhy[r]
                }
                if (why == "" && x in lib && (y = reaches(x, escape)) != "")
                    why = f " calls " x ", which starts processes or loads code (" y "): an exercise'"'"'s code does neither"
                if (why == "" && x in lib && !(x in api))
                    why = f " calls " x ", which an exercise'"'"'s code may not call: of dtlab'"'"'s functions it uses point-to-point, schedules, buffers, reductions, collectives and lib/nn'"'"'s layers (lib/p2p.h, schedule.h, buf.h, ops.h, collectives/collectives.h, nn/nn.h), not the files of programs, traces or the training engine"
                if (why == "" && !(x in lib) && x !~ libc && !(x ~ /^P?MPI_/ && x !~ mpino))
                    why = f " calls " x ", which an exercise'"'"'s code may not call: it uses dtlab'"'"'s and MPI'"'"'s functions and, from C'"'"'s library, memory, strings, numbers, math and printf (no files, descriptors, processes, threads, signals or environment; to print, printf)"
                if (why != "") { print f "\t" why; said[f, "done"] = 1 }
            }
        }'
}

# ==== running the cases ====

token=$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')
verdicts=$tmp/verdicts      # where the programs write their verdicts (grade.h)

# One run of some cases at n ranks: every case gets the grader's token, the deadline
# for one wait (DT_TIMEOUT), ASan's settings, and the hints setting; the exercises work
# on host memory, so the ranks take no GPU (DT_DEVICE=cpu). Every message goes through
# MPI (DT_P2P=staging): a send of more than MPI's eager limit then waits for its
# receive, as MPI allows any send to, so an order that can deadlock does. (Through a
# mailbox a send of up to 2 MiB returns at once, and two partners that both send first
# would get away with it.)
run_cases() {   # run_cases BIN N CASES(comma-separated)
    : >"$verdicts"
    GRADE_VERDICTS=$verdicts GRADE_TOKEN=$token GRADE_HINTS=$HINTS DT_TIMEOUT=$GRADE_WAIT MPIEXEC_TIMEOUT=$GRADE_TIMEOUT \
    DT_DEVICE=cpu DT_P2P=staging \
    ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:protect_shadow_gap=0:verify_asan_link_order=0 \
        timeout -k 5 $((GRADE_TIMEOUT + 10)) $MPIEXEC -n "$2" "$1" --case "$3" \
        >"$log" 2>&1 </dev/null
}

# read_verdicts N: what the last run's verdicts file says of each case at N ranks, read
# once: vpass[CASE], how many ranks passed it; vtwice[CASE], a rank that gave it two
# verdicts (the smallest, as text); vmsg[CASE], set when rank 0 failed it: the message of
# its first such line. Only whole lines that begin "@grade TOKEN CASE RANK N pass|fail"
# count ("pass" alone on its line to pass).
read_verdicts() {
    declare -gA vpass=() vtwice=() vmsg=()
    local name ok twice hasmsg msg
    while IFS=$'\037' read -r name ok twice hasmsg msg; do
        vpass[$name]=$ok
        [ -n "$twice" ] && vtwice[$name]=$twice
        [ "$hasmsg" = 1 ] && vmsg[$name]=$msg
    done < <(awk -v head="@grade $token " -v n="$1 " '
        index($0, head) != 1 { next }
        {   rest = substr($0, length(head) + 1); sp = index(rest, " ")
            if (sp < 2) next
            name = substr(rest, 1, sp - 1); rest = substr(rest, sp + 1)
            if (!match(rest, /^[0-9]+ /)) next
            rank = substr(rest, 1, RLENGTH - 1) ""; rest = substr(rest, RLENGTH + 1)
            if (index(rest, n) != 1) next
            v = substr(rest, length(n) + 1)
            if (v !~ /^(pass|fail)/) next
            seen[name] = 1
            if (v == "pass") ok[name]++
            if (++had[name, rank] == 2 && (!(name in twice) || rank < twice[name]))
                twice[name] = rank
            if (rank == "0" && v ~ /^fail/ && !(name in msg)) {
                m = substr(v, 5); if (substr(m, 1, 1) == " ") m = substr(m, 2)
                msg[name] = m }
        }
        END { for (k in seen)
                  printf "%s\037%d\037%s\037%d\037%s\n", k, ok[k], twice[k], (k in msg), msg[k] }
    ' "$verdicts")
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
        grep -qE "^@grade $token $1 $r $2 (pass|fail)" "$verdicts" || list="$list${list:+, }$r"
    done
    echo "${list:-none}"
}

# grade_at BIN N NAMES...: runs the cases at N ranks; each case that fails gets its
# verdict in fail[NAME] and its rerun command in rerun[NAME]. Cases whose run died
# before their turn run again.
grade_at() {
    local bin=$1 n=$2 name rc ok msg gone twice at="at $2 ranks, "
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
        read_verdicts "$n"
        local next=()
        gone=""
        for name in "${left[@]}"; do
            if [ -n "$gone" ]; then
                next+=("$name")
                continue
            fi
            ok=${vpass[$name]:-0} twice=${vtwice[$name]:-}
            rerun[$name]="MPIEXEC_TIMEOUT=$GRADE_TIMEOUT DT_TIMEOUT=$GRADE_WAIT DT_DEVICE=cpu DT_P2P=staging${hintvar} $MPIEXEC -n $n $(printf %q "$bin") --case $name"
            if [ -n "$twice" ]; then
                # (no program of dtlab's writes two; a rank's own fail after a forged
                # pass, or the like)
                fail[$name]="${at}rank $twice gave this case two verdicts: the grading program was tampered with"
                continue
            elif [ "$ok" = "$n" ]; then
                continue
            elif [ -n "${vmsg[$name]+1}" ]; then
                msg=${vmsg[$name]}
                # "K failed check(s) over N ranks; the first, on rank R: msg" -> "rank R: msg"
                msg=$(printf '%s' "$msg" | sed -E 's/^[0-9]+ failed check\(s\) over [0-9]+ ranks; the first, on (rank [0-9]+): /\1: /')
                if [ "${kind[$name]}" = pure ]; then
                    fail[$name]=${msg#rank 0: }
                else
                    fail[$name]="$at$msg"
                fi
            else
                died "$n" "${kind[$name]}" "$name" "$rc"
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

# grade_suite LABEL REFBIN BIN BUILT BUILDMSG OBJ COPY RULESBIN: grades every case of one
# suite; the rules, the deadlock hint and the rank counts past the default are the
# exercise's own (RULESBIN --rules), for an instructor's hidden suite too. OBJ is the
# learner's file compiled (COPY its copy under BUILD): what runs, and what the rules read.
grade_suite() {
    local label=$1 refbin=$2 bin=$3 built=$4 buildmsg=$5 obj=$6 copy=$7 rulesbin=$8
    local name pts k what use n got=0 sum=0 f
    declare -gA fail=() rerun=() kind=() reach=() gap=() gaprun=()
    local names=() pure=() mpi=()
    deadlock=$("$rulesbin" --rules | awk -F '\t' '$1 == "deadlock" { print $2; exit }')
    # the rules first: a case whose functions call what they should implement is not run
    local broken=""
    : >"$tmp/calls"
    : >"$tmp/syms"
    [ "$built" = 1 ] && [ "$SOLUTION" != 1 ] && { nm "$obj" >"$tmp/syms" 2>/dev/null
                                                 calls "$obj" "$tmp/syms" >"$tmp/calls"; }
    [ "$RULES" = 1 ] && [ "$built" = 1 ] && broken=$(broken_rules "$rulesbin" "$obj" "$copy")
    local ranks more
    ranks=$(suite_ranks "$rulesbin")
    more=${ranks#"$GRADE_RANKS"}
    [ -n "$more" ] && printf '   also graded at%s ranks, past the default, where its edge cases lie\n' \
        "$more" >>"$tmp/rows"
    exits=""
    [ "$built" = 1 ] && [ "$SOLUTION" != 1 ] && awk 'NF == 2' "$tmp/syms" |
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
    # the pure cases run once, at 1 rank: in the run of the others at 1 rank, if any
    local with1=()
    if [[ " $ranks " == *" 1 "* ]]; then
        with1=(${pure[@]+"${pure[@]}"})
    elif [ ${#pure[@]} -gt 0 ]; then
        grade_at "$bin" 1 "${pure[@]}"
    fi
    for n in $ranks; do
        local alive=()
        [ "$n" = 1 ] && alive=(${with1[@]+"${with1[@]}"})
        for name in ${mpi[@]+"${mpi[@]}"}; do
            [ -z "${fail[$name]:-}" ] && alive+=("$name")
        done
        [ ${#alive[@]} -gt 0 ] && grade_at "$bin" "$n" "${alive[@]}"
    done
    while IFS=$'\t' read -r name pts k what use; do
        [ -n "$name" ] || continue
        if [ -z "${fail[$name]:-}" ]; then
            got=$((got + pts))
            printf '   ok    %-18s %2d/%-2d %s\n' "$name" "$pts" "$pts" "$what" >>"$tmp/rows"
            tap 1 "$label $name ($pts points)"
            results case "$e" "$s" "$name" "$pts" "$pts" ok "$what" "" ""
        else
            printf '   FAIL  %-18s %2d/%-2d %s\n' "$name" 0 "$pts" "$what" >>"$tmp/rows"
            printf '         %s\n' "${fail[$name]}" | fold -s -w 88 | sed '2,$s/^/         /' >>"$tmp/rows"
            [ -n "${rerun[$name]:-}" ] && printf '         rerun: %s\n' "${rerun[$name]}" >>"$tmp/rows"
            tap 0 "$label $name ($pts points)" "${fail[$name]}" "${rerun[$name]:-}"
            results case "$e" "$s" "$name" 0 "$pts" fail "$what" "${fail[$name]}" "${rerun[$name]:-}"
        fi
    done < <("$refbin" --list)
    suite_got=$got
    suite_max=$sum
}

# suite_ranks RULESBIN: the rank counts to grade at: GRADE_RANKS, and when it was not set,
# the exercise's own past them, where its edge cases lie (RULESBIN --rules)
suite_ranks() {
    local more=""
    [ "$ranks_set" = 0 ] && more=$("$1" --rules | awk -F '\t' '$1 == "ranks" { print $2; exit }')
    echo "$GRADE_RANKS${more:+ $more}"
}

# vet_extra BIN FILE RULESBIN: an instructor's hidden suite must pass against dtlab's
# answers at every rank count it is graded at (suite_ranks RULESBIN) before it may take
# a learner's points; else the grading stops.
declare -A vetted=()
vet_extra() {
    local name pts k what use n ns bad=""
    local names=() pure=()
    while IFS=$'\t' read -r name pts k what use; do
        [ -n "$name" ] || continue
        if [ "$k" = pure ]; then pure+=("$name"); else names+=("$name"); fi
    done < <("$1" --list)
    for n in pure $(suite_ranks "$3"); do
        if [ "$n" = pure ]; then ns=(${pure[@]+"${pure[@]}"}); n=1; else ns=(${names[@]+"${names[@]}"}); fi
        [ ${#ns[@]} -gt 0 ] || continue
        run_cases "$1" "$n" "$(IFS=,; echo "${ns[*]}")"
        for name in "${ns[@]}"; do
            [ "$(grep -cE "^@grade $token $name [0-9]+ $n pass\$" "$verdicts")" = "$n" ] ||
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

# Every learner program built at once, in parallel, by one make (-k: past a file that
# does not build). When they all build, that is all; else each exercise's own make below
# says why its file does not build, or finds its program made.
built_all=0
if [ "$SOLUTION" != 1 ]; then
    targets=()
    for e in "${exercises[@]}"; do
        copy_in "$src/$e/${e#*_}.c" "$out/src/$e/${e#*_}.c"
        [ -e "$out/src/$e/${e#*_}.c" ] &&
            targets+=("$out/$e")
    done
    [ ${#targets[@]} -gt 0 ] &&
        mk $jobs -k GRADE_SRC="$out/src" GRADE_OUT="$out" "${targets[@]}" >"$tmp/build.log" 2>&1 &&
        built_all=1
fi
# build_one SUITE EXERCISE: makes SUITE's program for the learner's file, make's words in
# the log (none when the make above built every program)
build_one() {
    : >"$log"
    [ "$1" = "$2" ] && [ "$built_all" = 1 ] && return 0
    mk $jobs GRADE_SRC="$out/src" GRADE_OUT="$out" "$out/$1" >"$log" 2>&1
}

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
    state=graded    # (GRADE_RESULTS's word for how the exercise's own file fared)
    for s in "${suites[@]}"; do
        built=1; buildmsg=""
        if [ "$s" != "$e" ] && ! mk SOLUTION=1 "$ref/$s" >"$log" 2>&1; then
            cat "$log" >&2
            echo "grade: the extra suite $EXTRA_TESTS/${s#extra/}.c does not build with dtlab's reference (above)" >&2
            exit 1
        fi
        [ "$s" != "$e" ] && [ -z "${vetted[$s]:-}" ] && vet_extra "$ref/$s" "$EXTRA_TESTS/${s#extra/}.c" "$ref/$e" &&
            vetted[$s]=1
        if [ "$SOLUTION" = 1 ]; then
            :
        elif [ ! -e "$file" ]; then
            built=0
            buildmsg="not graded: $file is missing"
            state=missing
        elif ! build_one "$s" "$e"; then
            # the compiler's words once, under the exercise's row; each case says why
            built=0
            buildmsg="not graded: $file does not build (the errors are above)"
            [ "$s" = "$e" ] && state=nobuild
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
        grade_suite "$label" "$ref/$s" "$out/$s" "$built" "$buildmsg" "$out/obj/$e.o" \
            "$out/src/$e/${e#*_}.c" "$ref/$e"
        egot=$((egot + suite_got)); emax=$((emax + suite_max))
    done
    printf '%-44s %3d/%d\n' "$e" "$egot" "$emax"
    results exercise "$e" "$egot" "$emax" "$state" "$file"
    cat "$tmp/rows"
    total=$((total + egot)); max=$((max + emax))
done

{ echo "TAP version 13"; echo "# dtlab grader: $set_name"; echo "1..$ntap"
  cat "$tapbody"; echo "# total: $total/$max points"; } >"$TAP"
echo
echo "TAP report: $TAP"
echo "total: $total/$max points"
results total "$total" "$max"
if [ "$STRICT" = 1 ] && [ "$total" != "$max" ]; then
    echo "grade: below full marks (STRICT=1): exit status 1" >&2
    exit 1
fi
exit 0
