# Section 8 of tests/run.sh: bad input to every program a user runs.
#
# Each program gets each kind of bad input that applies to it: an unknown option, an
# option missing its value (last on the line, or followed by another option), values
# that are no whole number ("3x", "", "abc", "1e3", "nan", "inf"), negative and absurd
# sizes (and sizes that overflow when multiplied), values out of range, a stray
# argument, and rank counts the program cannot use. Every run must end soon with a
# usage error:
#   - exit status 2 for the job and for every rank (each rank runs under a small shell
#     wrapper that prints its own status),
#   - one "program: why" line and one usage text or pointer to --help on stderr: rank
#     0 speaks, not every rank; for the MPI programs exactly two lines, the sentence and
#     "Try 'program --help' for usage.", so that no usage text scrolls the sentence away,
#   - no dtlab abort line ("dtlab: rank R: ..."), no crash or sanitizer report,
#   - within 30 s (MPIEXEC_TIMEOUT, or timeout(1) for the programs without MPI), or
#     $bad_limit s when set.
# MPI programs run at 3 ranks, and at 1 rank for a case of each program. One line per
# program and kind of input; a FAIL names each argument list that went wrong and why,
# and the log below it holds those runs' output.
#
# run.sh sources this file and calls badinput_tests; it uses run.sh's report, now,
# status_words, missing, $tmp, $log, $BUILD and $MPIEXEC.

# The wrapper each rank runs in: the program, then the rank's own exit status.
bad_wrap='"$0" "$@"; rc=$?; echo "rank-exit ${PMI_RANK:-${PMIX_RANK:-?}} $rc" >&2
          exit $rc'

# bad_run N PROG ARGS...: runs PROG ARGS at N ranks (N = 0: alone, no MPI) and sets
# bad_why to "" when the run was a proper usage error, else to what was wrong. The
# "why" line must start with the program's name, or with $bad_name when it is set, and
# hold $bad_want when that is set.
bad_run() {
    local n=$1 prog=$2 rc ranks others k lines body limit=${bad_limit:-30}
    local name=${bad_name:-${2##*/}} out=$tmp/bad.out err=$tmp/bad.err
    shift 2
    if [ "$n" = 0 ]; then
        if command -v timeout >/dev/null 2>&1; then
            timeout "$limit" "$prog" "$@" >"$out" 2>"$err" </dev/null
        else
            "$prog" "$@" >"$out" 2>"$err" </dev/null
        fi
    else
        MPIEXEC_TIMEOUT=$limit "$MPIEXEC" -n "$n" sh -c "$bad_wrap" "$prog" "$@" \
            >"$out" 2>"$err" </dev/null
    fi
    rc=$?
    bad_why=""
    if grep -q 'APPLICATION TIMED OUT' "$out" "$err" || [ "$rc" = 124 ]; then
        bad_why="; timed out after $limit s"
    elif [ "$rc" != 2 ]; then
        bad_why="; $(status_words "$rc"), not 2"
    fi
    if [ "$n" != 0 ]; then
        ranks=$(grep -c '^rank-exit ' "$err")
        others=$(awk '/^rank-exit / && $3 != 2 { printf " rank %s: %s", $2, $3 }' "$err")
        [ "$ranks" = "$n" ] || bad_why="$bad_why; $ranks of $n ranks ended"
        [ -z "$others" ] || bad_why="$bad_why; exit status of$others"
    fi
    k=$(grep -Ec '^usage: |[Tt]ry .*--help|--help lists' "$err")
    [ "$k" = 1 ] || bad_why="$bad_why; $k usage texts or --help pointers, want 1"
    # (a CUDA build without a GPU says "dtlab: no usable GPU (...); running on the CPU")
    lines=$(grep -E "^($name|dtlab): " "$err" | grep -v '^dtlab: rank ' |
            grep -vc '; running on the CPU$')
    [ "$lines" = 1 ] || bad_why="$bad_why; $lines lines '$name: why', want 1"
    if [ "$n" != 0 ]; then              # the sentence, then the Try line: nothing else
        body=$(grep -v '^rank-exit ' "$err" | grep -v '; running on the CPU$' |
               grep -v '^[[:space:]]*$')
        k=$(grep -c . <<<"$body")
        [ "$k" = 2 ] || bad_why="$bad_why; $k lines of error output, want 2"
        [ "$(tail -n 1 <<<"$body")" = "Try '$name --help' for usage." ] ||
            bad_why="$bad_why; the last line is not \"Try '$name --help' for usage.\""
        if [ -n "${bad_want:-}" ] && [[ "$(head -n 1 <<<"$body")" != *"$bad_want"* ]]; then
            bad_why="$bad_why; the sentence does not name $bad_want"
        fi
    fi
    if grep -q '^dtlab: rank ' "$err"; then
        bad_why="$bad_why; dtlab's abort path"
    fi
    local crash='sanitizer|runtime error:|segmentation fault|caught signal|core dumped'
    if grep -Eqi "$crash|bad termination" "$out" "$err"; then
        bad_why="$bad_why; a crash"
    fi
    bad_why=${bad_why#; }
    if [ -n "$bad_why" ]; then
        { echo "---- $name $* (at $n ranks): $bad_why"
          grep -v '^rank-exit ' "$err" | head -n 6
          head -n 3 "$out"; } >>"$log"
    fi
}

# bad_group NAME RANKS PROG CASE...: each CASE, an argument list as the shell reads it
# ("--count ''" is --count and an empty word), at each rank count in RANKS (0: without
# MPI), run by bad_run (or $bad_runner, whose runs must end with status $bad_exit). A
# CASE "ARGS => WORDS" must also name WORDS in its sentence (bad_run's $bad_want, for
# that case alone). One PASS or FAIL line for the whole group.
bad_group() {
    local name=$1 ranks=$2 prog=$3 case n runs=0 fails="" t0 took want
    shift 3
    if [ ! -x "$prog" ]; then
        missing "$name" "$prog"
        return
    fi
    : >"$log"
    t0=$(now)
    for case in "$@"; do
        want=${bad_want:-}
        if [[ $case == *" => "* ]]; then
            want=${case#* => }
            case=${case%% => *}
        fi
        eval "set -- $case"
        for n in $ranks; do
            bad_want=$want "${bad_runner:-bad_run}" "$n" "$prog" "$@"
            runs=$((runs + 1))
            [ -z "$bad_why" ] || fails="$fails | [$case] at $n: $bad_why"
        done
    done
    took=$(since "$t0")
    if [ -z "$fails" ]; then
        report "$name" 1 \
            "$runs run$([ "$runs" = 1 ] || echo s), exit ${bad_exit:-2} on every rank  [$took]"
    else
        report "$name" 0 "${fails# | }  [$took]"
    fi
}

# full_run N PROG ARGS...: as bad_run, for output that fails only when it is written, at
# the end of a run (/dev/full: every write fails with ENOSPC). The run must end soon with
# exit status 1 on the job and on every rank, and a line on stderr that names /dev/full
# and the reason. /dev/full must stay a device: a writer that renames a FILE.tmp over it
# replaces the device with a file (it did, run as root).
full_run() {
    local n=$1 prog=$2 rc k others out=$tmp/full.out err=$tmp/full.err
    shift 2
    MPIEXEC_TIMEOUT=30 "$MPIEXEC" -n "$n" sh -c "$bad_wrap" "$prog" "$@" \
        >"$out" 2>"$err" </dev/null
    rc=$?
    bad_why=""
    if grep -q 'APPLICATION TIMED OUT' "$out" "$err"; then
        bad_why="; timed out after 30 s"
    elif [ "$rc" != 1 ]; then
        bad_why="; $(status_words "$rc"), not 1"
    fi
    k=$(grep -c '^rank-exit ' "$err")
    others=$(awk '/^rank-exit / && $3 != 1 { printf " rank %s: %s", $2, $3 }' "$err")
    [ "$k" = "$n" ] || bad_why="$bad_why; $k of $n ranks ended"
    [ -z "$others" ] || bad_why="$bad_why; exit status of$others"
    grep -q '/dev/full.*No space left on device' "$err" ||
        bad_why="$bad_why; no line names /dev/full and the reason"
    ! grep -q '^dtlab: rank ' "$err" || bad_why="$bad_why; dtlab's abort path"
    [ -c /dev/full ] || bad_why="$bad_why; /dev/full is no longer a device"
    bad_why=${bad_why#; }
    if [ -n "$bad_why" ]; then
        { echo "---- ${prog##*/} $* (at $n ranks): $bad_why"
          grep -v '^rank-exit ' "$err" | tail -n 6; } >>"$log"
    fi
}

# full_group NAME RANKS PROG CASE...: bad_group with full_run's checks.
full_group() {
    bad_runner=full_run bad_exit=1 bad_group "$@"
}

# env_run N PROG VAR=VALUE: PROG (train) with VAR=VALUE in its environment, at N ranks
# (0: alone, no launcher: LOCAL_RANK is read only there). A value dtlab cannot use must
# end every rank with status 2, within 30 s, and exactly two lines on stderr: "dtlab:
# VAR ... 'VALUE'..." (VAR named, its value quoted), then where the variables are listed,
# docs/environment.md, whose table must have a row for VAR. Sets bad_why as bad_run does.
env_run() {
    local n=$1 prog=$2 set=$3 var=${3%%=*} value=${3#*=} rc body k others
    local out=$tmp/env.out err=$tmp/env.err
    if [ "$n" = 0 ]; then
        env -u PMI_RANK -u PMIX_RANK "$set" timeout 30 "$prog" --steps 1 >"$out" 2>"$err" \
            </dev/null
    else
        env "$set" MPIEXEC_TIMEOUT=30 "$MPIEXEC" -n "$n" sh -c "$bad_wrap" "$prog" \
            --mode ddp --steps 1 >"$out" 2>"$err" </dev/null
    fi
    rc=$?
    bad_why=""
    [ "$rc" = 2 ] || bad_why="; $(status_words "$rc"), not 2"
    if [ "$n" != 0 ]; then
        k=$(grep -c '^rank-exit ' "$err")
        others=$(awk '/^rank-exit / && $3 != 2 { printf " rank %s: %s", $2, $3 }' "$err")
        [ "$k" = "$n" ] || bad_why="$bad_why; $k of $n ranks ended"
        [ -z "$others" ] || bad_why="$bad_why; exit status of$others"
    fi
    body=$(grep -v '^rank-exit ' "$err" | grep -v '; running on the CPU$' |
           grep -v '^[[:space:]]*$')
    k=$(grep -c . <<<"$body")
    [ "$k" = 2 ] || bad_why="$bad_why; $k lines on stderr, want 2"
    k=$(head -n 1 <<<"$body")
    [[ "$k" == "dtlab: $var"* && "$k" == *"$value"* ]] ||
        bad_why="$bad_why; the first line does not name $var and its value '$value'"
    [ "$(tail -n 1 <<<"$body")" = "dtlab: the variables dtlab reads, and their values: docs/environment.md" ] ||
        bad_why="$bad_why; the last line does not point to docs/environment.md"
    grep -q "^| \`$var=" docs/environment.md ||
        bad_why="$bad_why; docs/environment.md has no row for $var"
    bad_why=${bad_why#; }
    if [ -n "$bad_why" ]; then
        { echo "---- $set ${prog##*/} (at $n ranks): $bad_why"; head -n 4 "$err"; } >>"$log"
    fi
}

badinput_tests() {
    local L=$BUILD/lessons l png=$tmp/bad.png
    : >"$tmp/a-file"

    # ---- the lessons: every kind on one lesson of each option style (08 and 09 take
    # dt_parse_options' options, 13 dt_parse_int_options'), the common kinds on all
    # (--bogus, and '3x' for the first option, on every lesson: the loop further down)
    bad_group "08_ring_allreduce: unknown option" "3" "$L/08_ring_allreduce" \
        "-x" "--count 5 -qx" "--help=3"
    bad_group "08_ring_allreduce: missing value" "3" "$L/08_ring_allreduce" \
        "--count" "--count --type float" "--op" "--trace" "--device"
    bad_group "08_ring_allreduce: not a number" "3" "$L/08_ring_allreduce" \
        "--count ''" "--count abc" "--count 1e3" "--count nan" "--count inf" \
        "--iters 2.5"
    bad_group "08_ring_allreduce: negative, absurd" "3" "$L/08_ring_allreduce" \
        "--count -1" "--iters -5" "--count 99999999999" "--count 300M" \
        "--count 256M --type double" "--iters 2000000000"
    bad_group "08_ring_allreduce: out of range" "3" "$L/08_ring_allreduce" \
        "--iters 0" "--type quad" "--op avg" "--device gpu"
    bad_group "08_ring_allreduce: stray argument" "3" "$L/08_ring_allreduce" \
        "extra" "--count 4 5" "-"
    bad_group "09_allreduce_compare: sizes" "3" "$L/09_allreduce_compare" \
        "--max-size" "--min-size abc" "--max-size 1e3" "--max-size -4" \
        "--max-size 100G" "--min-size 0" "--min-size 1M --max-size 1K"
    bad_group "13_accum: missing value" "3" "$L/13_accum" \
        "--accum" "--steps --accum 2"
    bad_group "13_accum: not a number" "3" "$L/13_accum" \
        "--steps ''" "--accum abc" "--steps 1e3" "--accum nan" "--steps inf"
    bad_group "13_accum: negative, absurd, out of range" "3" "$L/13_accum" \
        "--steps -1" "--steps 2000000000" "--steps 99999999999999999999" \
        "--accum 0" "--accum 49" "--accum 7"
    bad_group "13_accum: stray argument" "3" "$L/13_accum" "extra" "--steps 2 3"

    bad_group "01_hello: bad input" "3" "$L/01_hello" \
        "--device" "extra"
    for l in 02_p2p:-1 04_reduce:99999999999 05_gather_scatter:-1 \
             06_allgather:99999999999 07_reduce_scatter:-1 10_alltoall:99999999999; do
        bad_group "${l%:*}: bad input" "3" "$L/${l%:*}" \
            "--count" "--count ${l#*:}" "extra"
    done
    bad_group "03_bcast: bad input" "3" "$L/03_bcast" \
        "--max-size" "--iters abc" "--max-size 100G" "extra"
    for l in 11_dp:async:-1 12_ddp:bucket-kb:2000000000 14_fsdp:hidden:-1 \
             15_tp:hidden:2000000000 16_pp:micro:-1 17_mixed:window:2000000000 \
             18_hybrid:dp:-1; do
        set -- ${l//:/ }
        bad_group "$1: bad input" "3" "$L/$1" \
            "--steps --$2 2" "--$2 $3" "extra"
    done
    # every lesson: an unknown option at 1 rank, and '3x' for the first option its --help
    # shows with a value (--device gpu for a lesson with none) at 3 (one rank count each:
    # the groups above take both kinds at both counts on lessons of each option style)
    local fails="" runs=0 t0 opt
    : >"$log"
    t0=$(now)
    for l in "$L"/[0-9][0-9]_*; do
        [ -x "$l" ] || continue
        opt=$(timeout 30 "$l" --help 2>/dev/null </dev/null |
              grep -Eo '^ +(-[a-zA-Z], )?--[a-z-]+ [A-Z]+\b' |
              grep -Ev -- '--(device|trace) | (FILE|DIR)$' | head -n 1 |
              grep -Eo -- '--[a-z-]+')
        bad_run 1 "$l" --bogus
        [ -z "$bad_why" ] || fails="$fails | ${l##*/} --bogus at 1: $bad_why"
        if [ -n "$opt" ]; then bad_run 3 "$l" "$opt" 3x
        else bad_run 3 "$l" --device gpu; fi
        [ -z "$bad_why" ] || fails="$fails | ${l##*/} ${opt:---device} at 3: $bad_why"
        runs=$((runs + 2))
    done
    if [ -z "$fails" ]; then
        report "every lesson: --bogus at 1 rank, a bad value at 3" 1 \
            "$runs runs, exit 2, the sentence and the Try line  [$(since "$t0")]"
    else
        report "every lesson: --bogus at 1 rank, a bad value at 3" 0 "${fails# | }"
    fi

    # rank counts the options cannot use: a usage error naming what would work
    bad_group "lessons: a root past the last rank" "1 3" "$L/03_bcast" "--root 3"
    bad_group "lessons: a root past the last rank (05)" "1" "$L/05_gather_scatter" \
        "--root 1"
    bad_group "15_tp: --hidden the ranks do not divide" "3" "$L/15_tp" \
        "--hidden 25" "--hidden 2"
    bad_group "16_pp: --micro that does not divide" "3" "$L/16_pp" "--micro 5"
    bad_group "18_hybrid: D x T x P not the rank count" "1 3" "$L/18_hybrid" \
        "--dp 2 --tp 2" "--pp 2" "--tp 65536 --pp 65536" \
        "--dp 65536 --tp 65536 --pp 65536"

    # ---- train: getopt_long with words, numbers and floats; modes and rank counts
    local T=$BUILD/train
    bad_group "train: unknown option, missing value" "3" "$T" \
        "--bogus" "--steps" "--steps --mode ddp" "--mode"
    bad_group "train: not a number" "3" "$T" \
        "--steps 3x" "--batch ''" "--hidden abc" "--steps 1e3" "--lr nan" "--lr inf" \
        "--lr 1e3" "--seed 1e3"
    bad_group "train: negative, absurd, out of range" "3" "$T" \
        "--batch -1" "--lr -1" "--seed -1" "--steps 2000000000" "--hidden 99999999999" \
        "--mode warp" "--mode fsdp --zero 4" "--mode ddp --zero 2"
    bad_group "train: sizes too large to hold" "3" "$T" \
        "--examples 16777216 --features 65536" "--mode ddp --layers 1000 --hidden 65536" \
        "--mode ddp --features 65536 --classes 65536 --hidden 65536"
    bad_group "train: stray argument" "3" "$T" "extra" "--mode ddp ddp"
    bad_group "train: rank counts a mode cannot use" "3" "$T" \
        "--mode tp --hidden 25" "--mode hybrid --dp 2 --tp 2" "--mode pp --layers 2" \
        "--mode serial" "--mode hybrid --tp 65536 --pp 65536"
    bad_group "train at 1 rank: bad input, rank counts" "1" "$T" \
        "--bogus" "--steps 3x" "--mode dp --dedicated-server" "--mode hybrid --dp 2"
    bad_group "train dp-threads: --threads, --gil, one rank" "1" "$T" \
        "--mode dp-threads --threads 0" "--mode dp-threads --threads abc" \
        "--mode dp-threads --threads 257" "--mode dp-threads --threads" \
        "--mode dp-threads --threads 25 --batch 24" "--mode ddp --threads 2" \
        "--mode serial --gil 0.3" "--mode dp-threads --gil 0" "--mode dp-threads --gil 1" \
        "--mode dp-threads --gil nan" "--mode dp-threads --gil x" \
        "--mode dp-threads --precision fp16" "--mode dp-threads --accum 2"
    bad_group "train dp-threads at 3 ranks (it is one process)" "3" "$T" \
        "--mode dp-threads" "--mode dp-threads --threads 3 --gil 0.5" \
        "--mode ddp --threads 3"
    # --prefetch gathers the next layer early: for fsdp's stage 3, the only one with
    # gathers (lib/parallel/fsdp.c)
    bad_group "train --prefetch: not fsdp, not --zero 3" "1 3" "$T" \
        "--mode ddp --prefetch" "--prefetch" "--mode fsdp --zero 1 --prefetch" \
        "--mode fsdp --zero 2 --prefetch" "--mode fsdp --prefetch 1"

    # ---- train --model gpt (lib/nn/gpt.h; its text, lib/nn/text.c): its shape, its text,
    # the options of the other model, ranks its heads cannot be shared by; each sentence
    # names the problem. $G runs ddp with a batch 3 ranks divide: nothing else is wrong.
    # At 3 ranks; the text, read by every rank, and the not-yet list at 1 rank too
    local G="--model gpt --mode ddp --batch 12" txt=$tmp/gpt-text
    mkdir -p "$txt"
    printf 'a text of 24 bytes only\n' >"$txt/short"
    : >"$txt/empty"
    printf 'a text\000with NUL bytes in it\n' >"$txt/binary"
    printf 'escape\033[1m codes\033[0m \033[31mall\033[0m over\n' >"$txt/control"
    bad_group "train --model gpt: its shape" "3" "$T" \
        "$G --heads 3 => --embed 64 is not a multiple of --heads 3" \
        "$G --embed 30 => --embed 30 is not a multiple of --heads 4" \
        "$G --embed 8 --heads 16 => is not a multiple of --heads 16" \
        "$G --layers 257 => --layers must be 1 to 256" \
        "$G --seq 0 => --seq wants a whole number" "$G --heads 0 => --heads wants" \
        "$G --embed 4096 --layers 4 => more than 256 MiB of them" \
        "--model gpt --mode ddp --batch 1048575 --seq 4096 => 256 MiB of activations"
    bad_group "train --model gpt: its text" "1 3" "$T" \
        "$G --seq 64 --text $txt/short => a text of at least 65 bytes; $txt/short has 24" \
        "$G --seq 24 --text $txt/short => a text of at least 25 bytes" \
        "$G --text $txt/empty => is empty" \
        "$G --text $txt/binary => is not text (it holds NUL bytes)" \
        "$G --text $txt/control => 1 byte in 20 is a control character" \
        "$G --text $txt/no-such-file => cannot read the text '$txt/no-such-file'" \
        "$G --text $txt => cannot read the text '$txt'" \
        "$G --text '' => --text '': the name is empty"
    bad_group "train --model: unknown" "3" "$T" \
        "--model bogus => --model does not take 'bogus'" "--model GPT => 'GPT'" \
        "--model '' => --model does not take ''" "--model => '--model' needs a value"
    bad_group "train: one model's options with the other" "3" "$T" \
        "$G --hidden 8 => --hidden is for --model mlp" \
        "--hidden 8 $G => --hidden is for --model mlp" \
        "$G --data $tmp => --data is for --model mlp" \
        "$G --act gelu => --act is for --model mlp" \
        "--heads 4 => --heads is for --model gpt" \
        "--mode ddp --text $txt/short => --text is for --model gpt" \
        "--model mlp --embed 32 => --embed is for --model gpt" \
        "--seq 16 --model mlp => --seq is for --model gpt"
    bad_group "train --model gpt: heads that 2 tp ranks cannot share" "2" "$T" \
        "--model gpt --mode tp --heads 3 --embed 48 => --heads must be a multiple of 2" \
        "--model gpt --mode hybrid --tp 2 --heads 5 --embed 40 => a multiple of 2"
    bad_group "train --model gpt: heads that 3 tp ranks cannot share" "3" "$T" \
        "--model gpt --mode tp => 4 heads cannot be shared by 3" \
        "--model gpt --mode tp --heads 2 --embed 32 => --heads must be a multiple of 3"
    bad_group "train --model gpt: more pipeline stages than units" "4" "$T" \
        "--model gpt --mode pp --layers 1 => 4 pipeline stages but the GPT has 3 units"
    bad_group "train --model gpt: moe, recomputation, sequence parallelism" "1 3" "$T" \
        "--model gpt --mode moe --layers 1 => --layers 2 or more" \
        "--model gpt --mode moe --recompute full => --recompute is for the other modes" \
        "--recompute full => --recompute is for --model gpt" \
        "--model gpt --recompute sometimes => does not take 'sometimes'" \
        "--model gpt --mode ddp --sp => --sp is for --mode tp or hybrid, not ddp" \
        "--mode tp --sp => --sp is sequence parallelism, for the GPT" \
        "--model gpt --mode hybrid --sp => it needs tensor-parallel ranks" \
        "--model gpt --mode tp --cp 2 => --cp is for --mode hybrid, not tp" \
        "--mode hybrid --cp 2 => --cp is context parallelism, for the GPT" \
        "--model gpt --mode hybrid --cp 3 --seq 16 => --seq 16 is no multiple of 3" \
        "--model gpt --mode hybrid --cp 2 --recompute selective => ring attention (--cp) never keeps"
    bad_group "train: pipeline schedules on 2 stages" "2" "$T" \
        "--mode pp --schedule interleaved --virtual 3 --layers 4 => make them a multiple of 6" \
        "--mode pp --schedule interleaved --virtual 2 --layers 6 => 6 layers cannot" \
        "--mode pp --virtual 2 => --virtual 2 is for --schedule interleaved" \
        "--mode pp --schedule zb-h1 --virtual 2 => --virtual 2 is for --schedule interleaved" \
        "--mode pp --schedule interleaved --virtual 65 => --virtual" \
        "--mode pp --schedule zigzag => does not take 'zigzag'" \
        "--mode ddp --virtual 2 => --virtual is for --mode pp or hybrid" \
        "--model gpt --mode pp --schedule zb-h1 --recompute full => one block's at a time" \
        "--model gpt --mode hybrid --tp 2 --sp --schedule interleaved => without --sp and --cp"
    bad_group "train: interleaved on one stage" "1" "$T" \
        "--mode pp --schedule interleaved --virtual 2 => needs 2 or more pipeline stages"

    # ---- collbench: its own getopt_long, short options, sizes with suffixes
    local C=$BUILD/bench/collbench
    bad_group "collbench: unknown option, missing value" "3" "$C" \
        "--bogus" "-x" "--iters" "--iters --check 1" "-n"
    bad_group "collbench: not a number" "3" "$C" \
        "--iters 3x" "--iters ''" "--minbytes abc" "--maxbytes 1e3" "--warmup_iters nan"
    bad_group "collbench: negative, absurd, out of range" "3" "$C" \
        "--iters -1" "--maxbytes -1" "--maxbytes 100G" "--maxbytes 4G" \
        "--minbytes 1M --maxbytes 1K" "--iters 0" "--stepfactor 1" "--check 2" \
        "--coll foo" "--datatype quad" "--wait spin" "--csv $tmp/a-file/x.csv"
    bad_group "collbench: rank counts (a root past the last rank)" "1 3" "$C" \
        "--root 3"
    bad_group "collbench: stray argument" "3" "$C" "extra"
    bad_group "collbench at 1 rank: bad input" "1" "$C" "--bogus" "--iters 3x"

    # ---- stepbench: one process, no MPI
    local S=$BUILD/bench/stepbench
    bad_group "stepbench: bad input" "0" "$S" \
        "--bogus" "--hidden" "--hidden 3x" "--batch 0" "--threads 257" "--layers -1" \
        "--optim sgdd" "--act tanh" "--seconds 0" "--seconds nan" "--max-steps 4" "extra"

    # ---- --trace (and train's --dump) where no file can be written: refused before work
    # that would outlast the 10 s allowed (--trace in dt_init), naming the path, and
    # creating nothing
    local D=$tmp/trace-dir p what
    rm -rf "$D" "$D.tmp"
    mkdir "$D"
    bad_limit=10
    for p in "in a missing folder:$D/no-such-dir/x.trace" "a folder:$D" "'':''"; do
        what=${p%%:*}
        p=${p#*:}
        bad_want=$p
        bad_group "--trace $what: lesson 08" "1 3" "$L/08_ring_allreduce" \
            "--iters 1000000 --trace $p"
        bad_group "--trace $what: train" "1 3" "$T" "--steps 1000000 --trace $p"
        bad_group "--trace $what: collbench" "1 3" "$C" "-C all -n 1000000 --trace $p"
        bad_group "--dump $what: train" "3" "$T" "--steps 1000000 --dump $p"
    done
    # empty folder and file names: a usage error, as --trace '' is; a folder of other
    # files is not taken for checkpoints (dtlab removes old step folders there)
    bad_want="''"
    bad_group "'' for --checkpoint, --resume: train" "3" "$T" \
        "--mode ddp --steps 1000000 --checkpoint ''" \
        "--mode ddp --steps 1000000 --resume ''"
    bad_group "'' for --csv: collbench" "1 3" "$C" "-n 1000000 --csv ''"
    bad_group "'' for --data: train" "3" "$T" "--data ''"
    # a place where permissions say yes (to root) but no file can be made: refused up
    # front too, by the trial FILE.tmp
    if [ -e /proc/version ]; then
        bad_want=/proc/version
        bad_group "--trace in /proc: lesson 08" "1 3" "$L/08_ring_allreduce" \
            "--iters 1000000 --trace /proc/version"
        # the same trial write behind every output option (dt_check_output), refused
        # before any training: a missing file in /proc, an existing one root may open
        bad_want=/proc/
        bad_group "--csv in /proc: lesson 24" "1 3" "$L/24_modes" \
            "--steps 50 --csv /proc/dtlab-x.csv" "--steps 50 --csv /proc/version"
        bad_group "--dump, --checkpoint in /proc: train" "1" "$T" \
            "--steps 1000000 --dump /proc/dtlab-x.f32" \
            "--mode ddp --steps 1000000 --checkpoint /proc/dtlab-ck"
        bad_group "--csv in /proc: collbench" "1" "$C" "-n 1000000 --csv /proc/version"
        bad_group "--keep in /proc: lesson 25" "1" "$L/25_elastic" "--keep /proc/dtlab-k"
        bad_want="''"
    fi
    if [ -d /sys/kernel ]; then
        bad_want=/sys/
        bad_group "--csv in /sys: lesson 24" "3" "$L/24_modes" \
            "--steps 50 --csv /sys/kernel/dtlab-x.csv"
        bad_want="''"
    fi
    bad_want="$D holds files that are not dtlab checkpoints"
    : >"$D/a-file"
    bad_group "--checkpoint, a folder of other files: train" "3" "$T" \
        "--mode ddp --steps 1000000 --checkpoint $D"
    rm -f "$D/a-file"
    unset bad_limit bad_want
    if [ -n "$(ls -A "$D")" ] || [ -e "$D.tmp" ]; then
        report "  the refused traces left nothing behind" 0 \
            "$(ls -A "$D" | head -n 3 | tr '\n' ' ')$([ -e "$D.tmp" ] && echo "$D.tmp")"
    fi

    # ---- a full disk at the end of a run: exit 1 on every rank, never a quiet success
    if [ -c /dev/full ] && [ -w /dev/full ]; then
        full_group "--trace /dev/full: lesson 08" "1 3" "$L/08_ring_allreduce" \
            "--trace /dev/full"
        full_group "--trace, --dump /dev/full: train" "1" "$T" \
            "--steps 2 --trace /dev/full" "--steps 2 --dump /dev/full"
        full_group "--csv /dev/full: collbench" "1" "$C" \
            "-C allreduce -n 1 -w 0 -e 4K --csv /dev/full"
        full_group "--csv /dev/full: lesson 24" "1 2" "$L/24_modes" \
            "--steps 2 --csv /dev/full"
    else
        echo "(no writable character device /dev/full here: the full-disk runs are" \
             "skipped)"
    fi

    # ---- dttrace and dtviz: no MPI
    bad_group "dttrace: bad input" "0" "$BUILD/dttrace" \
        "--bogus" "-x" "--chrome" "" "a b"
    bad_group "dtviz: unknown option, missing value" "0" "$BUILD/dtviz" \
        "--bogus" "-x" "--ranks" "--ranks --count 3" "--png"
    bad_group "dtviz: not a number" "0" "$BUILD/dtviz" \
        "--ranks 3x" "--ranks ''" "--count abc" "--ranks 1e3" "--ranks nan" \
        "--step inf" "--ranks ' 3' --png $png" "--ranks +3 --png $png"
    bad_group "dtviz: negative, absurd, out of range" "0" "$BUILD/dtviz" \
        "--ranks -1" "--ranks 100000" "--ranks 0" "--count 99999999999999" \
        "--step -1" "--step 99999999999" "--size 0x0" "--size 99999x99999" \
        "--size 1280x" "--algo ring-alreduce --png $png" \
        "--algo ring-allreduce --ranks 4 --step 1000 --png $png"
    bad_group "dtviz: stray argument" "0" "$BUILD/dtviz" "a b"
    bad_group "dtviz: timetable options" "0" "$BUILD/dtviz" \
        "--stages 0" "--stages 65" "--micro 0" "--micro 65" "--micro x" "--train-step x" \
        "--train-step -1" "--view bogus" "--cursor x" "--cursor inf" "--cursor 1e99" \
        "--algo ring-allreduce --stages 3 --png $png" "--algo gpipe --ranks 3 --png $png" \
        "--algo gpipe --count 3 --png $png" "--algo gpipe --train-step 2 --png $png" \
        "--algo ring-allreduce --train-step 1 --png $png" \
        "--algo ring-allreduce --view timetable --png $png" \
        "--algo ring-allreduce --cursor 1 --png $png" "--algo gpipe --step 1 --png $png" \
        "--algo 1f1b --view collective --png $png" "--step 1 --train-step 1" \
        "--step 1 --cursor 2" "--train-step 1 --view collective" "--window x" \
        "--window 5,1" "--window 1" "--window 1,inf" "--algo gpipe --window 100,200 --png $png" \
        "--algo ring-allreduce --window 1,2 --png $png" "--algo 1f1b --cursor 99 --png $png" \
        "--algo 1f1b --window 2,5 --cursor 9 --png $png" \
        "--layers 0" "--layers 65" "--layers x" "--buckets 0" "--buckets 65" "--comm 0" \
        "--comm 17" "--comm -1" "--algo ddp --buckets 7 --png $png" \
        "--algo ddp --layers 4 --buckets 5 --png $png" "--algo ddp --stages 3 --png $png" \
        "--algo ddp --micro 3 --png $png" "--algo ddp --count 3 --png $png" \
        "--algo ddp --ranks 65 --png $png" "--algo gpipe --layers 3 --png $png" \
        "--algo 1f1b --buckets 2 --png $png" "--algo ring-allreduce --comm 2 --png $png" \
        "--no-overlap --png $png" "--stages 3 --png $png" "$tmp/a-file --buckets 2"

    # ---- the grader: make grade's settings, and each exercise's grading program
    bad_name=grade
    bad_group "grade.sh: bad settings" "0" "$(command -v env)" \
        "BUILD=$BUILD EX=99 bash tests/grade/grade.sh" \
        "BUILD=$BUILD EX=1x bash tests/grade/grade.sh" \
        "BUILD=$BUILD SOLUTION=2 bash tests/grade/grade.sh" \
        "BUILD=$BUILD GRADE_TIMEOUT=0 bash tests/grade/grade.sh" \
        "BUILD=$BUILD GRADE_TIMEOUT=1e3 bash tests/grade/grade.sh" \
        "BUILD=$BUILD GRADE_TIMEOUT=-1 bash tests/grade/grade.sh" \
        "BUILD=$BUILD GRADE_TIMEOUT=99999 bash tests/grade/grade.sh" \
        "BUILD=$BUILD GRADE_RANKS=x bash tests/grade/grade.sh" \
        "BUILD=$BUILD GRADE_RANKS=0 bash tests/grade/grade.sh" \
        "BUILD=$BUILD GRADE_RANKS=-1 bash tests/grade/grade.sh" \
        "BUILD=$BUILD GRADE_RANKS=100 bash tests/grade/grade.sh" \
        "BUILD=$BUILD GRADE_RANKS=' ' bash tests/grade/grade.sh" \
        "BUILD=$BUILD WORK=$tmp/no-such-dir bash tests/grade/grade.sh" \
        "BUILD=$BUILD EXTRA_TESTS=$tmp/no-such-dir bash tests/grade/grade.sh" \
        "BUILD=$BUILD TAP=$tmp/a-file/x.tap bash tests/grade/grade.sh" \
        "BUILD=$BUILD TAP=$tmp bash tests/grade/grade.sh" \
        "BUILD=$BUILD WORK=exercises SOLUTION=1 bash tests/grade/grade.sh" \
        "BUILD=$BUILD bash tests/grade/grade.sh extra"
    unset bad_name
    local g
    g=$(ls -d "$BUILD"/grade/solution/[0-9][0-9]_* 2>/dev/null | head -n 1)
    if [ -n "$g" ] && [ -x "$g" ]; then
        bad_group "grading program ${g##*/}: bad input" "3" "$g" \
            "--bogus" "--case" "--case nosuch" "--case --list" "extra" "--list extra" \
            "--list --case x" "--help extra"
        bad_group "grading program ${g##*/}: alone and at 1 rank" "0 1" "$g" \
            "--bogus" "--case nosuch"
    else
        echo "(no grading program in $BUILD/grade/solution: section 7 builds them;" \
             "skipped)"
    fi

    # ---- environment variables with values dtlab cannot use: each refused at start-up,
    # on every rank, pointing to the table that lists them
    bad_runner=env_run bad_group "environment: bad values refused, with a pointer" "3" \
        "$T" DT_P2P=bogus DT_STAGE_KIB=1.5 DT_BLAS=2 DT_BLAS_THREADS=0 DT_WAIT=fast \
        DT_ALLREDUCE_ALGO=tree DT_WATCH=2 DT_TIMEOUT=soon DT_DEVICE=tpu DT_TEST_KILL=1x \
        DT_TEST_KILL=5:1 DT_TEST_CHECKPOINT_CRASH=1e3 DT_SYNC=yes
    bad_runner=env_run bad_group "environment: LOCAL_RANK without a launcher" "0" "$T" \
        LOCAL_RANK=x LOCAL_RANK=-1

    # ---- make run NP=...: mpiexec -n takes 0 or a word without complaint (and runs one
    # rank), so the Makefile checks NP itself
    local np why="" rc
    for np in 0 abc -2 "" 07; do
        make --no-print-directory -s run L=01 NP="$np" BUILD="$BUILD" MPIEXEC="$MPIEXEC" \
            >"$log" 2>&1 </dev/null
        rc=$?
        [ "$rc" = 2 ] && grep -q "is not a rank count" "$log" ||
            why="$why; NP='$np': $(status_words "$rc")"
    done
    [ -z "$why" ] && report "make run NP=0, abc, -2, '', 07: refused" 1 "exit 2" ||
        report "make run NP=0, abc, -2, '', 07: refused" 0 "${why#; }"
}
