# Section 13 of tests/run.sh: compressed gradients, train --mode ddp --compress
# (lib/parallel/compress.c). Sourced by run.sh, which then calls compress_tests; it uses
# run.sh's helpers (run, report, missing, now, since) and variables ($tmp, $log,
# $BUILD, $MPIEXEC, ${limit[@]}). The codecs and error feedback have their own unit
# suite (unit_compress, section 1) and lesson 20 its runs (section 3).
#
#   1. none, fp16, int8 and sign at 1 to 4 ranks, one bucket: exit 0, the loss goes
#      down, and the bytes each rank sent per step are measured exactly equal to the
#      model (the least and the most over the ranks): the ring's for fp16 (half of
#      fp32's), for int8 and sign, on every rank,
#      2 (P-1) x 4 (1 + ceil(ceil(G/P) bits / 32)), computed here from the parameter
#      count G; about 32/bits times fewer than the fp32 ring
#   2. fp16's final weights (--dump) within 1e-3 of uncompressed ddp's
#   3. sign without error feedback runs and says so
#   4. refusals, exit 2: --compress with other modes, a bad value, --no-feedback
#      without sign, --compress with --precision fp16
#   5. checkpoints: sign (per-rank error buffers) stopped and resumed equals a run
#      never stopped, byte for byte; resuming with another --compress is refused
#   6. a trace of ddp --compress sign replays in dtviz --png
#
# Small models (hidden 16, 6 steps): about 20 seconds.

compress_tests() {
    local train=$BUILD/train
    if [ ! -x "$train" ]; then
        missing train "$train"
        return
    fi
    local dir=$tmp/compress
    rm -rf "$dir"
    mkdir -p "$dir"
    local small=(--mode ddp --steps 6 --hidden 16 --layers 3 --examples 200 --batch 24
                 --bucket-kb 4096)

    # cx_train N ARGS...: train on N ranks under a time limit; output in $log
    cx_train() {
        local n=$1
        shift
        MPIEXEC_TIMEOUT=60 "$MPIEXEC" -n "$n" "$train" "$@" >"$log" 2>&1 </dev/null
    }

    # cx_bits KIND: bits a value travels in
    cx_bits() { case $1 in fp16) echo 16 ;; int8) echo 8 ;; sign) echo 1 ;; esac; }

    # ---- 1, 2: every codec at 1 to 4 ranks ----
    local n k t0 rc
    for n in 1 2 3 4; do
        t0=$(now)
        cx_train "$n" "${small[@]}" --dump "$dir/none.$n"
        rc=$?
        for k in fp16 int8 sign; do
            local name="ddp --compress $k -n $n"
            [ "$rc" = 0 ] || { report "$name" 0 "uncompressed run: exit $rc"; continue; }
            cx_train "$n" "${small[@]}" --compress "$k" --dump "$dir/$k.$n"
            local rk=$? took
            took=$(since "$t0")
            t0=$(now)
            if [ "$rk" != 0 ]; then
                report "$name" 0 "exit $rk  [$took]"
                continue
            fi
            # G from "N parameters"; "sent A to B over the ranks (model C to D)";
            # "uncompressed (fp32 ring, model) E to F"; the losses of steps 1 and 6
            local why
            why=$(awk -v P="$n" -v bits="$(cx_bits "$k")" -v k="$k" '
                / parameters$/ { G = $(NF - 1) }
                /^step 1 loss / { first = $4 }
                /^step 6 loss / { last = $4 }
                /^  sent .* over the ranks \(model / {
                    a = $2; b = $4; c = $9; d = $11; sub(/\)/, "", d) }
                /^  uncompressed \(fp32 ring, model\) / {
                    e = $5; f = $7; sub(/:/, "", f) }
                END {
                    if (last == "" || last + 0 >= first + 0)
                        { print "the loss did not go down: " first " -> " last; exit }
                    if (a == "" || a != c || b != d || (k != "fp16" && a != b))
                        { print "measured " a " to " b ", model " c " to " d; exit }
                    if (k == "fp16") {
                        if (P > 1 && (e != 2 * a || f != 2 * b)) {
                            print "fp16 sent " a " to " b ", fp32 ring " e " to " f
                            exit
                        }
                    } else {
                        chunk = int((G + P - 1) / P)
                        want = 2 * (P - 1) * 4 * (1 + int((chunk * bits + 31) / 32))
                        if (a != want) { print "sent " a ", formula " want; exit }
                        if (P > 1 && e / a < 0.75 * 32 / bits)
                            { print "only " e / a " times fewer than fp32"; exit }
                    }
                    printf "ok %s bytes a step", a
                    if (P > 1) printf ", %.1fx fewer than fp32", e / a
                }' "$log")
            if [ "${why#ok }" = "$why" ]; then
                report "$name" 0 "$why  [$took]"
            else
                report "$name" 1 "loss down, ${why#ok }  [$took]"
            fi
        done
        # 2. fp16's weights beside uncompressed ones
        if [ -s "$dir/fp16.$n" ] && [ -s "$dir/none.$n" ]; then
            local diff
            diff=$(paste <(od -An -v -tf4 -w4 "$dir/none.$n") \
                         <(od -An -v -tf4 -w4 "$dir/fp16.$n") |
                   awk '{ d = $1 - $2; d = d < 0 ? -d : d; m = d > m ? d : m; c++ }
                        END { if (c == 0) print "none"; else printf "%.3g", m }')
            local ok=0
            awk -v d="$diff" 'BEGIN { exit !(d != "none" && d + 0 <= 1e-3) }' && ok=1
            report "fp16 weights beside uncompressed -n $n" "$ok" \
                "max |difference| $diff (limit 1e-3)"
        fi
    done

    # ---- 3. sign without error feedback ----
    t0=$(now)
    cx_train 3 "${small[@]}" --compress sign --no-feedback
    rc=$?
    if [ "$rc" = 0 ] && grep -q 'sign without error feedback' "$log" &&
       ! grep -q 'error buffers' "$log"; then
        report "ddp --compress sign --no-feedback -n 3" 1 \
            "no error buffers  [$(since "$t0")]"
    else
        report "ddp --compress sign --no-feedback -n 3" 0 "exit $rc, or the summary does \
not say it ran without feedback  [$(since "$t0")]"
    fi

    # ---- 4. refusals ----
    local bad
    for bad in "--mode dp --compress int8" "--mode fsdp --compress fp16" \
               "--mode hybrid --compress sign" "--mode ddp --compress int4" \
               "--mode ddp --compress int8 --no-feedback" \
               "--mode ddp --compress fp16 --precision fp16"; do
        # shellcheck disable=SC2086
        run "train $bad -n 2: exit 2" 2 env MPIEXEC_TIMEOUT=60 "$MPIEXEC" -n 2 "$train" \
            --steps 2 --hidden 16 --examples 200 --batch 24 $bad
    done

    # ---- 5. checkpoints with error feedback ----
    local c=$dir/ckpt rc1 rc2 rc3
    t0=$(now)
    cx_train 3 "${small[@]}" --compress sign --dump "$c.full"
    rc1=$?
    cx_train 3 "${small[@]}" --compress sign --steps 3 --checkpoint "$c" --every 2
    rc2=$?
    cx_train 3 "${small[@]}" --compress sign --resume "$c" --dump "$c.res"
    rc3=$?
    if [ "$rc1$rc2$rc3" != 000 ]; then
        report "checkpoint ddp --compress sign -n 3" 0 "exit statuses $rc1 $rc2 $rc3"
    elif ! cmp -s "$c.full" "$c.res"; then
        report "checkpoint ddp --compress sign -n 3" 0 "the resumed weights differ"
    else
        report "checkpoint ddp --compress sign -n 3" 1 "resumed at step 3: weights \
byte-equal  [$(since "$t0")]"
    fi
    cx_train 3 "${small[@]}" --compress int8 --resume "$c"
    rc=$?
    if [ "$rc" = 2 ] && grep -q 'compress' "$log"; then
        report "resume with another --compress: refused" 1 "exit 2"
    else
        report "resume with another --compress: refused" 0 "exit $rc"
    fi

    # ---- 6. the trace in the viewer ----
    local dtviz=$BUILD/dtviz trace=$dir/compress.trace
    if [ ! -x "$dtviz" ]; then
        missing dtviz "$dtviz"
        return
    fi
    cx_train 3 "${small[@]}" --compress sign --steps 2 --trace "$trace"
    rc=$?
    if [ "$rc" != 0 ] || ! grep -q 'alltoall' "$trace" 2>/dev/null; then
        report "ddp --compress sign --trace" 0 "exit $rc, or no all-to-all in the trace"
        return
    fi
    run "dtviz --png ddp --compress sign trace" 0 ${limit[@]+"${limit[@]}"} \
        env SDL_VIDEODRIVER=dummy "$dtviz" --png "$dir/compress.png" --step 1 "$trace"
}
