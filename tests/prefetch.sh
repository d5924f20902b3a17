# Section 17 of tests/run.sh: FSDP with prefetching (train --mode fsdp --prefetch), the
# next layer's allgather on a communication thread while this layer computes.
#
#   1. the same weights as without, bit for bit (cmp of the --dump files): prefetching
#      moves when a gather runs, not what it gathers nor the order of any sum. ZeRO 3,
#      the only stage that gathers (1 and 2 refuse --prefetch: tests/badinput.sh), at
#      1, 2 and 3 ranks; 5 layers (odd) of hidden 25 (layers the ranks do not divide:
#      padded shards), SGD and Adam; and at 3 ranks one layer, fp16, and --offload
#   2. serial training's weights, to rounding (as section 5 holds ddp), at 1, 2, 3 ranks
#      (tests/mpi_train.c holds it to its own serial reference at every rank count too)
#      Checkpoints: saved with --prefetch, resumed with and without it, the weights of
#      the run never stopped; a refused resume is exit 2 (the thread's communicator is
#      freed first, as ddp's is)
#   3. the summary: the peak memory measured equals the expected byte for byte, and
#      prefetch costs at most one more gathered layer; the bytes sent equal the run
#      without's
#   4. the trace, at 2 and 3 ranks, 6 steps of 5 layers: a gather of layer l+1 that
#      overlaps the forward of layer l, and one of layer l-1 that overlaps the backward
#      of layer l; on every rank, a gather that began before the compute of the layer
#      before it ended; without --prefetch none of these (its gathers come between the
#      computes). How many depends on the scheduler: a thread may finish a gather before
#      its rank's compute starts, or, with more threads than cores, wait for a core until
#      that compute is over (seen on a loaded 2-core machine: a rank whose backward
#      gathers all began late), so one overlap of each kind over the ranks, one early
#      gather per rank, and no time are asked. The "# train" line says "prefetch on";
#      dttrace reads the trace and dtviz draws it
#
# run.sh sources this file and calls prefetch_tests; it uses run.sh's run, report, now,
# since, missing, status_words, $tmp, $log, $limit, $BUILD and $MPIEXEC.

prefetch_tests() {
    local train=$BUILD/train n name t0 why
    if [ ! -x "$train" ]; then
        missing "train (for --prefetch)" "$train"
        return
    fi
    local small=(--steps 4 --batch 24 --hidden 25 --examples 200 --quiet)
    local d=$tmp/prefetch
    mkdir -p "$d"

    # pf_pair NAME N ARGS...: fsdp --zero 3 without and with --prefetch into
    # $d/NAME.{jit,pre}.f32 (and the runs' output into .log), then cmp
    pf_pair() {
        local name=$1 n=$2 rc1 rc2
        shift 2
        t0=$(now)
        "$MPIEXEC" -n "$n" "$train" --mode fsdp --zero 3 "$@" --dump "$d/$name.jit.f32" \
            >"$d/$name.jit.log" 2>&1 </dev/null
        rc1=$?
        "$MPIEXEC" -n "$n" "$train" --mode fsdp --zero 3 --prefetch "$@" \
            --dump "$d/$name.pre.f32" >"$d/$name.pre.log" 2>&1 </dev/null
        rc2=$?
        cat "$d/$name.jit.log" "$d/$name.pre.log" >"$log"
        why=""
        [ "$rc1" = 0 ] || why="; without: $(status_words "$rc1")"
        [ "$rc2" = 0 ] || why="$why; with --prefetch: $(status_words "$rc2")"
        if [ -z "$why" ] && [ -s "$d/$name.pre.f32" ] &&
           cmp -s "$d/$name.jit.f32" "$d/$name.pre.f32"; then
            report "fsdp --prefetch = without, bit for bit: $name" 1 \
                "$(($(wc -c <"$d/$name.pre.f32") / 4)) weights  [$(since "$t0")]"
        else
            [ -n "$why" ] || why="; the weights differ (or no dump)"
            report "fsdp --prefetch = without, bit for bit: $name" 0 "${why#; }"
        fi
    }
    for n in 1 2 3; do
        pf_pair "5 layers sgd -n $n" "$n" --layers 5 "${small[@]}"
        pf_pair "5 layers adam -n $n" "$n" --layers 5 --optim adam --lr 0.01 "${small[@]}"
    done
    pf_pair "1 layer -n 3" 3 --layers 1 "${small[@]}"
    pf_pair "fp16 adam -n 3" 3 --layers 5 --precision fp16 --optim adam --lr 0.01 \
        "${small[@]}"
    pf_pair "offload -n 3" 3 --layers 3 --offload "${small[@]}"

    # 2. against serial training (the tolerance of section 5)
    run "train serial --dump (5 layers)" 0 "$MPIEXEC" -n 1 "$train" --mode serial \
        --layers 5 "${small[@]}" --dump "$d/serial.f32"
    for n in 1 2 3; do
        : >"$log"
        name="fsdp --prefetch -n $n weights = serial's"
        if [ -s "$d/serial.f32" ] && [ -s "$d/5 layers sgd -n $n.pre.f32" ]; then
            set -- $(paste <(od -An -v -f -w4 "$d/serial.f32") \
                           <(od -An -v -f -w4 "$d/5 layers sgd -n $n.pre.f32") |
                     awk '{ d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1
                            if (d > m) m = d; if (d > 1e-5 + 1e-4 * a || NF != 2) bad++ }
                          END { printf "%d %d %g", NR, bad, m }')
            if [ "$2" = 0 ] && [ "$1" -gt 0 ]; then
                report "$name" 1 "$1 weights, largest difference $3"
            else
                report "$name" 0 "$2 of $1 weights differ (largest $3)"
            fi
        else
            report "$name" 0 "a dump is missing"
        fi
    done

    # checkpoints: prefetching is no part of the state (nothing is in flight between
    # steps), so a run saved with --prefetch resumes with or without it to the weights
    # of a run never stopped; a refused resume (another width) ends every rank with 2
    local ck=$d/ck full="$d/5 layers sgd -n 3.pre.f32" how
    run "fsdp --prefetch --checkpoint after 2 of 4 steps -n 3" 0 "$MPIEXEC" -n 3 "$train" \
        --mode fsdp --prefetch --layers 5 "${small[@]}" --steps 2 --checkpoint "$ck"
    for how in --prefetch ""; do
        rm -f "$d/resumed.f32"
        run "fsdp${how:+ $how} --resume -n 3" 0 "$MPIEXEC" -n 3 "$train" --mode fsdp $how \
            --layers 5 "${small[@]}" --resume "$ck" --dump "$d/resumed.f32"
        : >"$log"
        if [ -s "$d/resumed.f32" ] && cmp -s "$full" "$d/resumed.f32"; then
            report "  = the run never stopped, bit for bit" 1 ""
        else
            report "  = the run never stopped, bit for bit" 0 "the weights differ"
        fi
    done
    run "fsdp --prefetch --resume refused (another width) -n 3" 2 "$MPIEXEC" -n 3 "$train" \
        --mode fsdp --prefetch --layers 5 "${small[@]}" --hidden 30 --resume "$ck"

    # 3. the summary of a prefetched run: memory as expected, the bytes of the run without
    local f=$d/"5 layers adam -n 3"
    cat "$f.pre.log" >"$log"
    why=""
    set -- $(awk '/^  expected  / { e = $2 " " $3 " " $4 }
                  /^  measured peak / { m = $3 " " $4 " " $5 }
                  END { print (e == m && e != "") ? "same" : "differ" }' "$f.pre.log")
    [ "$1" = same ] || why="; measured peak is not the expected"
    local more most
    more=$(sed -n 's/^  prefetch: \([0-9]*\) bytes more, .*/\1/p' "$f.pre.log")
    most=$(sed -n 's/^    largest one; .* = \([0-9]*\)$/\1/p' "$f.pre.log")
    [ -n "$more" ] && [ "$more" -gt 0 ] && [ "$more" -le "$most" ] ||
        why="$why; prefetch's extra memory '$more' is not in (0, $most]"
    [ "$(grep '^sent per step' "$f.pre.log")" = "$(grep '^sent per step' "$f.jit.log")" ] ||
        why="$why; it sent other bytes than the run without"
    if [ -z "$why" ]; then
        report "fsdp --prefetch: memory and bytes as expected" 1 \
            "$more bytes more, at most $most"
    else
        report "fsdp --prefetch: memory and bytes as expected" 0 "${why#; }"
    fi

    # 4. the overlap in the trace. Columns: t0 t1 rank kind peer coll phase step chunk.
    # Per rank, "R:E:F:B": gathers that began before the compute they follow ended (E),
    # and that overlapped it: forward (a step's first gather of layer l, with layer
    # l-1's forward: F) and backward (its second gather of l, with l+1's backward: B)
    local overlap='
        /^#/ { next }
        $4 == "compute" && $6 == "train" && $7 == "forward" { f0[$3, $8, $9] = $1
                                                             f1[$3, $8, $9] = $2 }
        $4 == "compute" && $6 == "train" && $7 == "backward" { b0[$3, $8, $9] = $1
                                                              b1[$3, $8, $9] = $2 }
        $4 == "mark" && $6 == "fsdp" && $7 == "gather" {
            k = $3 SUBSEP $8 SUBSEP $9; i = seen[k]++; g0[k, i] = $1; g1[k, i] = $2
            ranks[$3] = 1 }
        END {
            for (k in seen) {
                split(k, a, SUBSEP); r = a[1]
                p = r SUBSEP a[2] SUBSEP (a[3] - 1); q = r SUBSEP a[2] SUBSEP (a[3] + 1)
                if ((p in f0) && g0[k, 0] < f1[p]) {            # forward: l-1, then l
                    e[r]++
                    if (f0[p] < g1[k, 0]) fw[r]++
                }
                if (seen[k] > 1 && (q in b0) && g0[k, 1] < b1[q]) {   # backward: l+1
                    e[r]++
                    if (b0[q] < g1[k, 1]) bw[r]++
                }
            }
            for (r in ranks) printf "%s:%d:%d:%d ", r, e[r], fw[r], bw[r]
        }'
    local trace pf rows row bad
    for n in 2 3; do
        for pf in --prefetch ""; do
            trace=$d/pf$n${pf:+-prefetch}.trace
            if [ -n "$pf" ]; then
                name="fsdp --prefetch -n $n trace: gathers overlap compute"
            else
                name="fsdp -n $n trace (no prefetch): no gather overlaps compute"
            fi
            run "train fsdp --zero 3${pf:+ $pf} -n $n --trace" 0 "$MPIEXEC" -n "$n" "$train" \
                --mode fsdp --zero 3 $pf --steps 6 --batch 96 --hidden 256 --layers 5 \
                --quiet --trace "$trace"
            [ -s "$trace" ] || continue
            rows=$(awk "$overlap" "$trace")
            bad=""
            local fw=0 bw=0
            for row in $rows; do
                set -- ${row//:/ }
                fw=$((fw + $3))
                bw=$((bw + $4))
                if [ -n "$pf" ]; then
                    [ "$2" -gt 0 ] || bad="$bad; no gather on rank $1 began early"
                else
                    [ "$2" = 0 ] || bad="$bad; rank $1: $2 gathers began early"
                fi
            done
            if [ -n "$pf" ]; then
                [ "$fw" -gt 0 ] || bad="$bad; no gather overlaps a forward"
                [ "$bw" -gt 0 ] || bad="$bad; no gather overlaps a backward"
            fi
            [ "$(wc -w <<<"$rows")" = "$n" ] || bad="$bad; gathers on $(wc -w <<<"$rows") ranks"
            if [ -n "$pf" ] && ! grep -q '^# train mode fsdp zero 3 offload off prefetch on ' \
                "$trace"; then
                bad="$bad; no '# train ... prefetch on' line"
            fi
            : >"$log"
            if [ -z "$bad" ]; then
                report "$name" 1 "rank:early:forward:backward ${rows% }"
            else
                report "$name" 0 "${bad#; } (rank:early:forward:backward ${rows% })"
            fi
        done
    done
    trace=$d/pf3-prefetch.trace
    if [ -s "$trace" ] && [ -x "$BUILD/dttrace" ]; then
        run "dttrace on the fsdp --prefetch trace" 0 ${limit[@]+"${limit[@]}"} \
            "$BUILD/dttrace" "$trace"
    fi
    if [ -s "$trace" ] && [ -x "$BUILD/dtviz" ]; then
        run "dtviz --png on the fsdp --prefetch trace" 0 env SDL_VIDEODRIVER=dummy \
            ${limit[@]+"${limit[@]}"} "$BUILD/dtviz" --png "$d/pf.png" --train-step 2 "$trace"
        [ -s "$d/pf.png" ] || report "dtviz drew the fsdp --prefetch trace" 0 "no PNG"
    fi
}
