# Section 16 of tests/run.sh: asking for the GPU means the GPU (lib/core.c, dt_init).
#
#   1. --device cuda, or DT_DEVICE=cuda, where no GPU can be used: every rank stops soon
#      with status 1, and one line on stderr names the rank and says why in CUDA's
#      words (or that the build has no CUDA); the program itself prints nothing
#   2. the default (neither given) runs on the CPU, exit 0; a CUDA build says so once
#      on stderr, never on stdout; --device cpu says nothing
#   3. --help with --device cuda still prints the usage text, exit 0
# The GPU is hidden from CUDA (CUDA_VISIBLE_DEVICES empty), so the section means the same
# on a machine that has one. Running on a real GPU is scripts/gpu-check.sh's business.
#
# run.sh sources this file and calls gpu_tests; it uses run.sh's report, now, since,
# status_words, missing, $tmp, $log, $BUILD and $MPIEXEC.

gpu_tests() {
    local hello=$BUILD/lessons/01_hello train=$BUILD/train cuda=0
    if [ ! -x "$hello" ] || [ ! -x "$train" ]; then
        missing "lesson 01_hello and train" "$hello or $train"
        return
    fi
    grep -q 'CUDA=1' "$BUILD/config" 2>/dev/null && cuda=1

    # gp_run N ENV... -- PROGRAM ARGS...: the GPU hidden; stdout in $tmp/gpu.out, stderr
    # in $tmp/gpu.err, both in $log; sets rc and took
    gp_run() {
        local n=$1 env=(env CUDA_VISIBLE_DEVICES= MPIEXEC_TIMEOUT=30) t0
        shift
        while [ "$1" != -- ]; do env+=("$1"); shift; done
        shift
        t0=$(now)
        "${env[@]}" "$MPIEXEC" -n "$n" "$@" >"$tmp/gpu.out" 2>"$tmp/gpu.err" </dev/null
        rc=$?
        took=$(since "$t0")
        cat "$tmp/gpu.out" "$tmp/gpu.err" >"$log"
    }

    # gp_refused NAME N ENV... -- PROGRAM ARGS...: status 1, the one line, nothing else
    gp_refused() {
        local name=$1 n=$2 why="" lines
        shift 2
        gp_run "$n" "$@"
        lines=$(grep -c '^dtlab: rank [0-9]*: --device cuda .*asks for a GPU, but this rank has none: .' \
                "$tmp/gpu.err")
        if grep -q 'APPLICATION TIMED OUT' "$log"; then
            why="timed out: a rank was left waiting"
        elif [ "$rc" != 1 ]; then
            why="$(status_words "$rc"), want exit 1"
        elif [ "$lines" != 1 ]; then
            why="$lines lines saying why on stderr, want 1"
        elif [ "$cuda" = 0 ] && ! grep -q 'built without CUDA' "$tmp/gpu.err"; then
            why="the message does not say the build has no CUDA"
        elif grep -q . "$tmp/gpu.out"; then
            why="the program ran: $(head -n 1 "$tmp/gpu.out")"
        fi
        if [ -z "$why" ]; then
            report "$name" 1 "exit 1: $(sed 's/.*has none: //' "$tmp/gpu.err" | head -n 1 |
                cut -c1-40)  [$took]"
        else
            report "$name" 0 "$why  [$took]"
        fi
    }
    gp_refused "--device cuda without a GPU -n 3" 3 -- "$hello" --device cuda
    gp_refused "DT_DEVICE=cuda without a GPU -n 2" 2 DT_DEVICE=cuda -- "$hello"
    gp_refused "train --device cuda without a GPU -n 2" 2 -- "$train" --mode ddp \
        --steps 2 --device cuda
    gp_refused "--device cuda after DT_DEVICE=cpu -n 2" 2 DT_DEVICE=cpu -- "$hello" \
        --device cuda

    # the default: the CPU, and (with CUDA) one notice on stderr
    local name notice
    gp_run 2 -- "$hello"
    name="default device without a GPU -n 2: the CPU"
    notice=$(grep -c 'running on the CPU' "$tmp/gpu.err")
    if [ "$rc" != 0 ]; then
        report "$name" 0 "$(status_words "$rc")  [$took]"
    elif grep -q 'running on the CPU' "$tmp/gpu.out"; then
        report "$name" 0 "the notice is on stdout  [$took]"
    elif [ "$cuda" = 1 ] && [ "$notice" != 1 ]; then
        report "$name" 0 "$notice notices on stderr, want 1  [$took]"
    elif [ "$cuda" = 0 ] && [ "$notice" != 0 ]; then
        report "$name" 0 "a build without CUDA has no GPU to miss, but says so  [$took]"
    else
        report "$name" 1 "exit 0, ${notice} notice on stderr  [$took]"
    fi
    gp_run 2 -- "$hello" --device cpu
    name="--device cpu -n 2: the CPU, not a word"
    if [ "$rc" != 0 ]; then
        report "$name" 0 "$(status_words "$rc")  [$took]"
    elif grep -q 'running on the CPU' "$log"; then
        report "$name" 0 "it says 'running on the CPU'  [$took]"
    else
        report "$name" 1 "exit 0  [$took]"
    fi
    gp_run 1 -- "$hello" --device cuda --help
    name="--device cuda --help without a GPU"
    if [ "$rc" = 0 ] && grep -q '^usage:' "$tmp/gpu.out"; then
        report "$name" 1 "exit 0, the usage text  [$took]"
    else
        report "$name" 0 "$(status_words "$rc"), want exit 0 and the usage text  [$took]"
    fi
}
