# Section 10 of tests/run.sh: train's checkpoints (lib/parallel/checkpoint.c). Sourced by
# run.sh, which then calls checkpoint_tests; it uses run.sh's helpers (run, report,
# status_words, now, missing) and variables ($tmp, $log, $BUILD, $MPIEXEC).
#
#   1. every mode: a run stopped at a checkpoint and resumed ends with the weights of a
#      run never stopped, byte for byte (--dump, cmp), and prints the same losses for
#      the steps after the checkpoint
#   2. another rank count or layout (resharding): every mode stopped on N ranks and
#      resumed on M, larger and smaller, odd counts, hybrid's layouts, against the run
#      never stopped: pp byte for byte, the others within rounding (their sums change
#      order); the summary says what each rank read, and in four cases how many old
#      shards each rank read is held to what it needs (hybrid --dp 2 --tp 2 -> --dp 1
#      --tp 2: one each, its own state's bytes; a bias every tp rank keeps is read from
#      the shard the rank reads anyway)
#   3. refusals, exit 2 and a sentence on stderr: a checkpoint of another mode,
#      --hidden or optimizer; sign compression's error feedback on another rank
#      count; --steps not beyond the step reached; a flipped byte in a shard (rank 0's,
#      another rank's, one read for another layout); a truncated manifest; a missing
#      shard; an empty directory; writing over another run's checkpoints; manifests
#      edited by hand (their CRC made right again) with hostile numbers: a map of 2^32
#      runs (resharded and not), a span past the model, a width of 2^32 + 1, a map
#      larger than its region, a shard of -1 bytes, a region larger than its shard, a
#      reads line naming a rank the run lacked; each within a short time limit, so
#      that a rank allocating without bound fails the test rather than hangs it
#   4. a rank killed half-way through writing a shard (DT_TEST_CHECKPOINT_CRASH):
#      latest still names the checkpoint before, the half-written one is never used,
#      and resuming from it reaches the uninterrupted run's weights
#
# Small models (6 steps, hidden 16): the whole section takes about a minute and a half.

checkpoint_tests() {
    local train=$BUILD/train
    if [ ! -x "$train" ]; then
        missing train "$train"
        return
    fi
    local dir=$tmp/ckpt
    rm -rf "$dir"
    mkdir -p "$dir"
    local small=(--steps 6 --hidden 16 --layers 3 --examples 200 --batch 24)

    # ck_train N ARGS...: train on N ranks under a time limit; output in $log
    ck_train() {
        local n=$1
        shift
        MPIEXEC_TIMEOUT=60 "$MPIEXEC" -n "$n" "$train" "${small[@]}" "$@" \
            >"$log" 2>&1 </dev/null
    }

    # ck_losses FILE: "step N loss X" of every step line
    ck_losses() { awk '/^step [0-9]+ loss / { print $1, $2, $3, $4 }' "$1"; }

    # ck_same NAME N ARGS...: a run of 6 steps, against one stopped after step 3 (with
    # checkpoints every 2 steps and after the last) and resumed to step 6
    ck_same() {
        local name="checkpoint $1 -n $2" n=$2 t0 rc1 rc2 rc3 c=$dir/$1.$2
        shift 2
        c=${c// /_}
        t0=$(now)
        ck_train "$n" "$@" --dump "$c.full"
        rc1=$?
        cp "$log" "$c.full.log"
        ck_train "$n" "$@" --steps 3 --checkpoint "$c" --every 2
        rc2=$?
        ck_train "$n" "$@" --checkpoint "$c" --every 2 --resume "$c" --dump "$c.res"
        rc3=$?
        local took
        took=$(since "$t0")
        if [ "$rc1$rc2$rc3" != 000 ]; then
            report "$name" 0 "exit statuses $rc1 $rc2 $rc3, want 0 0 0  [$took]"
            return
        fi
        local want got
        want=$(ck_losses "$c.full.log" | awk '$2 > 3')
        got=$(ck_losses "$log")
        if ! cmp -s "$c.full" "$c.res"; then
            report "$name" 0 "the resumed weights differ from the whole run's  [$took]"
        elif [ "$got" != "$want" ] || [ "$(printf '%s\n' "$got" | wc -l)" != 3 ]; then
            report "$name" 0 "losses of steps 4..6 differ: got '$got', want '$want'"
        elif ! grep -q 'resumed at step 3,' "$log"; then
            report "$name" 0 "the summary does not say it resumed at step 3  [$took]"
        else
            report "$name" 1 "weights byte-equal, losses of steps 4-6 equal  [$took]"
        fi
    }

    # fp16: a scale window of 2 steps grows the scale, and it overflows, around the
    # checkpoint of step 3 (each step's report says so); 1e6 overflows 3 steps first
    ck_same serial 1 --mode serial
    ck_same dp 3 --mode dp
    ck_same "dp dedicated" 3 --mode dp --dedicated-server
    ck_same "dp fp16" 2 --mode dp --precision fp16 --scale-window 2
    ck_same ddp 1 --mode ddp
    ck_same ddp 3 --mode ddp --bucket-kb 1
    ck_same "ddp accum" 2 --mode ddp --accum 2
    ck_same "ddp fp16" 2 --mode ddp --precision fp16 --loss-scale 1e6 --scale-window 2
    ck_same "fsdp zero 1 sgd" 3 --mode fsdp --zero 1
    ck_same "fsdp zero 1 adam" 2 --mode fsdp --zero 1 --optim adam --lr 0.01
    ck_same "fsdp zero 2 sgd" 2 --mode fsdp --zero 2
    ck_same "fsdp zero 2 adam" 3 --mode fsdp --zero 2 --optim adam --lr 0.01
    ck_same "fsdp zero 3 sgd" 3 --mode fsdp --zero 3
    ck_same "fsdp zero 3 adam" 1 --mode fsdp --zero 3 --optim adam --lr 0.01
    ck_same "fsdp fp16" 3 --mode fsdp --precision fp16 --optim adam --lr 0.01 \
        --scale-window 2
    ck_same "tp megatron" 2 --mode tp
    ck_same "tp allgather" 3 --mode tp --tp-style allgather --hidden 18
    ck_same "pp gpipe" 3 --mode pp --schedule gpipe
    ck_same "pp 1f1b" 2 --mode pp --schedule 1f1b --micro 2
    ck_same hybrid 4 --mode hybrid --dp 2 --pp 2 --micro 2

    # ck_reshard NAME N M TOL ARGS...: a run of 6 steps on N ranks, against one stopped
    # after step 3 on N ranks and resumed on M (another layout: ARGS2 after "--" replace
    # the layout options for the resumed run). TOL "exact": byte for byte (the sums keep
    # their order), else the difference allowed: TOL/10 + TOL x |the weight|
    ck_reshard() {
        local name="checkpoint resharded $1 -n $2 -> $3" n=$2 m=$3 tol=$4 t0 rc1 rc2 rc3
        local c=$dir/rs.$1.$2.$3 a=() b=() seen=0 x
        shift 4
        for x in "$@"; do
            if [ "$x" = -- ]; then seen=1; elif [ $seen = 0 ]; then a+=("$x"); else b+=("$x"); fi
        done
        [ $seen = 1 ] || b=("${a[@]}")
        c=${c// /_}
        t0=$(now)
        ck_train "$n" "${a[@]}" --dump "$c.full"
        rc1=$?
        ck_train "$n" "${a[@]}" --steps 3 --checkpoint "$c" --every 2
        rc2=$?
        ck_train "$m" "${b[@]}" --checkpoint "$c" --every 2 --resume "$c" --dump "$c.res"
        rc3=$?
        local took cmp
        took=$(since "$t0")
        if [ "$rc1$rc2$rc3" != 000 ]; then
            report "$name" 0 "exit statuses $rc1 $rc2 $rc3, want 0 0 0  [$took]"
            return
        fi
        if ! grep -q "resharded from $n rank" "$log" ||
           [ "$(grep -c '^checkpoint:   rank [0-9]* read [0-9]* bytes' "$log")" != "$m" ]; then
            report "$name" 0 "the summary does not say it resharded, or what each of the $m ranks read"
            return
        fi
        if [ "$tol" = exact ]; then
            if cmp -s "$c.full" "$c.res"; then
                report "$name" 1 "weights byte-equal to the run on $n ranks  [$took]"
            else
                report "$name" 0 "the weights differ from the run on $n ranks  [$took]"
            fi
            return
        fi
        cmp=$(paste <(od -An -v -f -w4 "$c.full") <(od -An -v -f -w4 "$c.res") |
              awk -v tol="$tol" '{ d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1
                     if (d > m) m = d; if (d > tol / 10 + tol * a || NF != 2) bad++ }
                   END { printf "%d %d %g", NR, bad, m }')
        set -- $cmp
        if [ "$2" = 0 ] && [ "$1" -gt 0 ] && cmp -s "$c.full" "$c.res"; then
            report "$name" 0 "byte-equal: this case was meant to change the order of the sums"
        elif [ "$2" = 0 ] && [ "$1" -gt 0 ]; then
            report "$name" 1 "$1 weights within $tol of the run on $n ranks (largest $3)  [$took]"
        else
            report "$name" 0 "$2 of $1 weights differ from the run on $n ranks (largest $3)"
        fi
    }

    # ck_reads NAME "K0 K1 ..." [own]: in the summary ($log, the resumed run of the
    # ck_reshard before), rank r read K_r old shards; with own, each read its state's
    # bytes and no more (rank 0 also the run's own: 8 bytes a step, 3 steps)
    ck_reads() {
        local name="checkpoint resharded $1: old shards read" want=$2 own=${3:-} got
        got=$(awk -v own="$own" '
            /^checkpoint:   rank [0-9]+ read [0-9]+ bytes from / {
                r = $3; b = $5; f = $8; s = $13
                printf "%s%d", n++ ? " " : "", f
                if (own != "" && b != s + (r == 0 ? 24 : 0))
                    bad = bad sprintf(" rank %d read %d bytes, its state is %d;", r, b, s)
            }
            END { if (bad != "") printf " (%s)", bad }' "$log")
        if [ "$got" = "$want" ]; then
            report "$name" 1 "per rank: $got${own:+; each read the bytes of its own state}"
        else
            report "$name" 0 "per rank: '$got', want '$want'"
        fi
    }

    # another rank count or layout: the state re-cut (lib/parallel/checkpoint_reshard.c);
    # pp's sums keep their order whatever the stages, the others' change with N
    ck_reshard ddp 3 2 1e-4 --mode ddp --bucket-kb 1
    ck_reshard "ddp accum" 1 4 1e-4 --mode ddp --accum 2
    ck_reshard "fsdp zero 3 adam" 2 3 1e-4 --mode fsdp --zero 3 --optim adam --lr 0.01
    ck_reads "fsdp 2 -> 3" "1 2 1"        # ceil((r+1)N/M) - floor(rN/M) old shards
    ck_reshard "fsdp zero 1" 3 1 1e-4 --mode fsdp --zero 1
    ck_reshard "fsdp fp16" 3 2 1e-3 --mode fsdp --zero 2 --precision fp16
    ck_reshard "tp megatron" 3 2 1e-4 --mode tp --hidden 18
    ck_reads "tp 3 -> 2" "2 2"            # before: "3 2", a bias from a third shard
    ck_reshard "tp allgather adam" 2 3 1e-4 --mode tp --tp-style allgather --hidden 18 \
        --optim adam --lr 0.01
    ck_reshard "pp gpipe" 3 2 exact --mode pp --schedule gpipe --micro 2
    ck_reshard "pp 1f1b" 2 3 exact --mode pp --schedule 1f1b --micro 2
    ck_reshard "hybrid dp2 pp2 to tp2 pp2" 4 4 1e-4 --mode hybrid --dp 2 --pp 2 --micro 2 \
        -- --mode hybrid --tp 2 --pp 2 --micro 2
    ck_reshard "hybrid dp2 tp2 to dp1 pp2" 4 2 1e-4 --mode hybrid --dp 2 --tp 2 --micro 2 \
        -- --mode hybrid --dp 1 --pp 2 --micro 2
    # both old tp shards hold the row-split layer's whole bias: each rank reads only
    # the one of its own tp index (before: rank 0 read both)
    ck_reshard "hybrid dp2 tp2 to dp1 tp2" 4 2 1e-4 --mode hybrid --dp 2 --tp 2 --micro 2 \
        -- --mode hybrid --dp 1 --tp 2 --micro 2
    ck_reads "hybrid 2x2 -> 1x2" "1 1" own
    ck_reshard "dp" 3 2 1e-4 --mode dp
    ck_reshard "dp fp16" 2 3 1e-3 --mode dp --precision fp16
    ck_reshard "dp dedicated" 3 4 1e-4 --mode dp --dedicated-server
    ck_reshard "ddp compress fp16" 2 3 1e-3 --mode ddp --compress fp16

    # ck_format_weights STEPDIR: the whole model's weights in a checkpoint, one a line as
    # od prints them, read the way docs/checkpoints.md's paragraph on the format says: the
    # shard lines' regions, the maps of "weights" (fsdp's "weights.L"), their spans
    ck_format_weights() {
        awk -v dir="$1" '
            /^shard / { file[$2] = $3; off = 0
                        for (i = 6; i <= NF; i++) { split($i, nb, ":")
                                                    at[$2 " " nb[1]] = off; off += nb[2] } }
            /^map / && ($3 == "weights" || $3 ~ /^weights\.[0-9]+$/) { map[++nm] = $0 }
            END {
                for (i = 1; i <= nm; i++) {
                    split(map[i], f, " "); r = f[2]; width = f[4]
                    if (!(r in loaded)) {
                        cmd = "od -An -v -f -w4 " dir "/" file[r]; n = 0
                        while ((cmd | getline x) > 0) { gsub(/ /, "", x); fl[r, n++] = x }
                        close(cmd); loaded[r] = 1
                    }
                    e = at[r " " f[3]] / 4
                    for (j = 5; j in f; j++) {
                        c = split(f[j], v, ","); count = c == 4 ? v[3] : 1
                        for (b = 0; b < count; b++)
                            for (q = 0; q < v[2]; q++) {
                                w[v[1] + b * (c == 4 ? v[4] : 0) + q] = fl[r, e]; e += width
                            }
                    }
                }
                for (i = 0; i in w; i++) print w[i]
            }' "$1/manifest"
    }
    # the format, read from outside: tp (a row split's strided spans), fsdp (padding),
    # hybrid (stages and replicas), against the --dump of the same weights
    local which
    for which in tp_megatron.2 fsdp_zero_3_sgd.3 hybrid.4; do
        if [ "$(ck_format_weights "$dir/$which/step-0000006")" = \
             "$(od -An -v -f -w4 "$dir/$which.full" | tr -d ' ')" ] &&
           [ -s "$dir/$which.full" ]; then
            report "checkpoint format read from outside: $which" 1 \
                "awk over the manifest's maps and od: the --dump weights, every one"
        else
            report "checkpoint format read from outside: $which" 0 \
                "the weights docs/checkpoints.md's format gives are not the --dump weights"
        fi
    done

    # ck_bad NAME N PATTERN ARGS...: exit 2 on every rank, soon, and a sentence on
    # stderr that matches PATTERN (grep -E)
    ck_bad() {
        local name="checkpoint refuses $1 -n $2" n=$2 pat=$3 t0 rc took msg
        shift 3
        t0=$(now)
        MPIEXEC_TIMEOUT=${ck_limit:-30} "$MPIEXEC" -n "$n" "$train" "${small[@]}" "$@" \
            >"$log" 2>"$tmp/stderr" </dev/null
        rc=$?
        took=$(since "$t0")
        cat "$tmp/stderr" >>"$log"
        msg=$(grep -v '^usage:' "$tmp/stderr" | grep -v '; running on the CPU$' | head -n 1)
        if grep -q 'APPLICATION TIMED OUT' "$log"; then
            report "$name" 0 "timed out: a rank was left waiting  [$took]"
        elif [ "$rc" != 2 ]; then
            report "$name" 0 "$(status_words "$rc"), want exit 2  [$took]"
        elif ! grep -Eq -- "$pat" "$tmp/stderr"; then
            report "$name" 0 "exit 2, but stderr does not match '$pat'  [$took]"
        else
            [ ${#msg} -le 60 ] || msg="...${msg: -57}"
            report "$name" 1 "exit 2: $msg  [$took]"
        fi
    }

    # checkpoints the cases above left at step 6 (latest), each its own copy
    local d2=$dir/ddp.3 f3=$dir/fsdp_zero_1_sgd.3 t2=$dir/tp_megatron.2 b
    ck_bad "another mode" 3 'written by --mode ddp on 3 ranks; this run is --mode fsdp' \
        --mode fsdp --steps 8 --resume "$d2"
    b=$dir/sign; rm -rf "$b"
    ck_train 2 --mode ddp --compress sign --steps 3 --checkpoint "$b" --every 3
    ck_bad "sign's error feedback on another rank count" 3 \
        'each rank.s own error feedback.*resume it on 2 ranks' \
        --mode ddp --compress sign --steps 8 --resume "$b"
    ck_bad "another --hidden" 3 'with --hidden 16; this run has --hidden 24' \
        --mode ddp --bucket-kb 1 --steps 8 --hidden 24 --resume "$d2"
    ck_bad "another optimizer" 3 'with --optim sgd; this run has --optim adam' \
        --mode ddp --bucket-kb 1 --steps 8 --optim adam --resume "$d2"
    ck_bad "--steps 6 at step 6" 3 'reached step 6' \
        --mode ddp --bucket-kb 1 --steps 6 --resume "$d2"

    # damage: each in a copy
    b=$dir/flip0; cp -r "$d2" "$b"
    printf '\x55' | dd of="$b/step-0000006/shard-00000.bin" bs=1 seek=100 conv=notrunc \
        2>/dev/null
    ck_bad "a flipped byte (rank 0's shard)" 3 'shard-00000.bin is damaged' \
        --mode ddp --bucket-kb 1 --steps 8 --resume "$b"
    b=$dir/flip2; cp -r "$f3" "$b"
    printf '\xaa' | dd of="$b/step-0000006/shard-00002.bin" bs=1 seek=7 conv=notrunc \
        2>/dev/null
    ck_bad "a flipped byte (rank 2's shard)" 3 'shard-00002.bin is damaged' \
        --mode fsdp --zero 1 --steps 8 --resume "$b"
    b=$dir/flip1; cp -r "$f3" "$b"
    printf '\xaa' | dd of="$b/step-0000006/shard-00001.bin" bs=1 seek=9 conv=notrunc \
        2>/dev/null
    ck_bad "a flipped byte, resharded 3 -> 2" 2 'shard-00001.bin is damaged' \
        --mode fsdp --zero 1 --steps 8 --resume "$b"
    b=$dir/cut; cp -r "$d2" "$b"
    head -c -30 "$d2/step-0000006/manifest" >"$b/step-0000006/manifest"
    ck_bad "a truncated manifest" 3 'manifest is (incomplete|damaged)' \
        --mode ddp --bucket-kb 1 --steps 8 --resume "$b"
    b=$dir/noshard; cp -r "$t2" "$b"
    rm "$b/step-0000006/shard-00001.bin"
    ck_bad "a missing shard (rank 1's)" 2 'cannot open shard-00001.bin' \
        --mode tp --steps 8 --resume "$b"
    # ck_edit SRC DST SED: DST a copy of checkpoint SRC whose step-0000006 manifest sed
    # edited as a hand would, its CRC line made right again (gzip's trailer holds the
    # CRC-32 of its input, little-endian), so that only what the lines say can refuse it
    ck_edit() {
        local text crc m=$2/step-0000006/manifest
        rm -rf "$2"
        cp -r "$1" "$2"
        text=$(sed -e '$d' -e "$3" "$1/step-0000006/manifest")
        crc=$(printf '%s\n' "$text" | gzip -c | tail -c 8 | head -c 4 | od -An -tx4 |
              tr -d ' ')
        printf '%s\ncrc32 %s\n' "$text" "$crc" >"$m"
    }
    b=$dir/scale
    ck_edit "$d2" "$b" 's/^scale .*/scale banana/'
    ck_bad "a loss scale that is no number" 3 "its 'scale' line does not hold a positive" \
        --mode ddp --bucket-kb 1 --steps 8 --resume "$b"
    # hostile numbers in the maps and shard lines: refused on every rank before anything
    # is sized by them, well inside a 10 s limit (a rank that allocated without bound,
    # as one did for the first of these, would time out or be killed)
    local h2=$dir/rs.hybrid_dp2_tp2_to_dp1_tp2.4.2 hyb=(--mode hybrid --micro 2 --steps 8)
    b=$dir/runs
    ck_edit "$h2" "$b" 's/^\(map 0 weights 1\) .*/\1 0,1,4294967295,1/'
    ck_limit=10 ck_bad "a map of 2^32 runs, resharded 1x2 -> 2x2" 4 \
        "line [0-9]+: span 1 of rank 0.s .weights. \(0,1,4294967295,1\) reaches past" \
        "${hyb[@]}" --dp 2 --tp 2 --resume "$b"
    ck_edit "$d2" "$b" 's/^\(map 0 weights 1\) .*/\1 0,1,4294967295,1/'
    ck_limit=10 ck_bad "a map of 2^32 runs, same layout" 3 \
        'span 1 of rank 0.s .weights. .* reaches past the model.s last parameter' \
        --mode ddp --bucket-kb 1 --steps 8 --resume "$b"
    b=$dir/len; ck_edit "$f3" "$b" 's/^\(map 1 state.0 1\) \([0-9]*\),[0-9]*/\1 \2,18446744073709551615/'
    ck_limit=10 ck_bad "a span of 2^64-1 parameters, resharded" 2 \
        "rank 1.s .state.0. \([0-9]+,18446744073709551615\) reaches past" \
        --mode fsdp --zero 1 --steps 8 --resume "$b"
    b=$dir/width; ck_edit "$d2" "$b" 's/^map 0 state 1 /map 0 state 4294967297 /'
    ck_limit=10 ck_bad "a map width of 2^32 + 1" 3 'cannot read the map line.*WIDTH 1 to' \
        --mode ddp --bucket-kb 1 --steps 8 --resume "$b"
    b=$dir/wide; ck_edit "$d2" "$b" 's/^map 0 weights 1 /map 0 weights 2 /'
    ck_limit=10 ck_bad "a map larger than its region" 3 \
        "rank 0.s .weights. maps [0-9]+ parameters of 2 floats .* into a region of" \
        --mode ddp --bucket-kb 1 --steps 8 --resume "$b"
    b=$dir/minus; ck_edit "$d2" "$b" 's/^\(shard 0 shard-00000.bin\) [0-9]*/\1 -1/'
    ck_limit=10 ck_bad "a shard of -1 bytes" 3 'line [0-9]+: cannot read the shard line' \
        --mode ddp --bucket-kb 1 --steps 8 --resume "$b"
    b=$dir/region; ck_edit "$d2" "$b" 's/weights:[0-9]*/weights:99999999999999999999/'
    ck_limit=10 ck_bad "a region larger than its shard" 3 'regions do not fit its shard' \
        --mode ddp --bucket-kb 1 --steps 8 --resume "$b"
    b=$dir/reads; ck_edit "$d2" "$b" 's/^reads .*/reads 0 0 7/'
    ck_limit=10 ck_bad "a reads line naming rank 7 of 3" 3 'the reads line does not name' \
        --mode ddp --bucket-kb 1 --steps 8 --resume "$b"
    DT_TEST_KILL=9:3 ck_bad "DT_TEST_KILL naming a rank the run lacks" 3 \
        'DT_TEST_KILL=9:3 names a rank this run never reaches' --mode ddp
    mkdir -p "$dir/empty"
    ck_bad "an empty directory" 3 'holds no checkpoint' \
        --mode ddp --steps 8 --resume "$dir/empty"
    ck_bad "writing over a checkpoint" 3 'already holds a checkpoint' \
        --mode ddp --bucket-kb 1 --steps 8 --checkpoint "$d2"
    ck_bad "dp --async 1" 3 'cannot be checkpointed' \
        --mode dp --async 1 --checkpoint "$dir/async"
    ck_bad "--every without --checkpoint" 2 '--every is for --checkpoint' \
        --mode ddp --every 2

    # a kill half-way through writing rank 2's shard of step 4: step 2 stays the newest
    local c=$dir/crash fl=$dir/fsdp_zero_3_sgd.3 t0 rc took
    t0=$(now)
    DT_TEST_CHECKPOINT_CRASH=4 ck_train 3 --mode fsdp --zero 3 --checkpoint "$c" --every 2
    rc=$?
    took=$(since "$t0")
    local half full
    half=$(stat -c %s "$c/step-0000004.tmp/shard-00002.bin" 2>/dev/null || echo none)
    full=$(stat -c %s "$c/step-0000002/shard-00002.bin" 2>/dev/null || echo none)
    if [ "$rc" = 0 ] || ! grep -q 'stops half-way' "$log"; then
        report "checkpoint: a kill while writing step 4" 0 \
            "$(status_words "$rc"): the test hook did not stop the run  [$took]"
    elif [ "$(cat "$c/latest" 2>/dev/null)" != step-0000002 ] || [ -e "$c/step-0000004" ]
    then
        report "checkpoint: a kill while writing step 4" 0 \
            "latest is '$(cat "$c/latest" 2>/dev/null)', want step-0000002  [$took]"
    elif [ "$half" = none ] || [ "$full" = none ] || [ "$half" -ge "$full" ]; then
        report "checkpoint: a kill while writing step 4" 0 \
            "the half-written shard has $half bytes, a whole one $full  [$took]"
    else
        report "checkpoint: a kill while writing step 4" 1 \
            "$(status_words "$rc"); latest step-0000002; .tmp shard $half of $full bytes"
    fi
    ck_train 3 --mode fsdp --zero 3 --checkpoint "$c" --every 2 --resume "$c" \
        --dump "$c.res"
    rc=$?
    if [ "$rc" != 0 ]; then
        report "checkpoint: resumed after the kill" 0 "$(status_words "$rc")"
    elif ! grep -q 'resumed at step 2,' "$log"; then
        report "checkpoint: resumed after the kill" 0 "it did not resume at step 2"
    elif ! cmp -s "$c.res" "$fl.full"; then
        report "checkpoint: resumed after the kill" 0 \
            "the weights differ from the uninterrupted run's"
    elif [ -e "$c/step-0000004.tmp" ] || [ "$(cat "$c/latest")" != step-0000006 ]; then
        report "checkpoint: resumed after the kill" 0 \
            "a leftover .tmp, or latest is not step-0000006"
    else
        report "checkpoint: resumed after the kill" 1 \
            "from step 2: weights byte-equal; latest step-0000006, no .tmp left"
    fi

    # a kill while writing the first checkpoint: nothing to resume from, and it says so
    c=$dir/crash1
    DT_TEST_CHECKPOINT_CRASH=2 ck_train 2 --mode tp --checkpoint "$c" --every 2
    rc=$?
    if [ "$rc" = 0 ] || [ -e "$c/latest" ] || [ ! -d "$c/step-0000002.tmp" ]; then
        report "checkpoint: a kill while writing the first" 0 \
            "$(status_words "$rc"); latest $(cat "$c/latest" 2>/dev/null || echo none)"
    else
        report "checkpoint: a kill while writing the first" 1 \
            "$(status_words "$rc"); no latest, only step-0000002.tmp"
    fi
    ck_bad "a half-written first checkpoint" 2 'holds no checkpoint' \
        --mode tp --steps 8 --resume "$c"
}
