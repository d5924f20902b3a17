# Section 12 of tests/run.sh: mixture of experts (lib/parallel/moe.c, moe_route.c).
# Sourced by run.sh, which then calls moe_tests; it uses run.sh's helpers (run, report,
# status_words, now, since, missing) and variables ($tmp, $log, $BUILD, $MPIEXEC).
#
#   1. train --mode moe on N ranks against 1 rank holding every expert with the same
#      --moe-groups: the weights byte for byte (--dump, cmp), the loss, aux loss and
#      dropped count of every step, and the run's dropped total; at 2, 3, 4 and 5 ranks,
#      2 ranks with 4 groups, top-2, a capacity that drops half the tokens, and Adam
#      with GELU on 5 layers; the GPT (--model gpt, experts in blocks 1 and 3) at 2 and
#      3 ranks, and with one expert that takes every token against serial training of
#      the dense GPT: the same weights byte for byte, the gate aside
#   2. the loss goes down; the summary's traffic: measured bytes = the model's
#   3. settings moe cannot run: exit 2 on every rank, soon, with a sentence
#   4. a traced run replayed by dtviz into a PNG; lesson 19 with top-2
#
# The pure routing arithmetic has its own unit suite, tests/unit_moe.c (section 1).
# Small models (5 steps, hidden 16): the whole section takes well under a minute.

moe_tests() {
    local train=$BUILD/train
    if [ ! -x "$train" ]; then
        missing train "$train"
        return
    fi
    local dir=$tmp/moe
    mkdir -p "$dir"
    local small=(--mode moe --steps 5 --batch 60 --hidden 16 --layers 3 --examples 300)

    # moe_train N OUT ARGS...: train on N ranks, output in OUT.log, weights in OUT.f32
    moe_train() {
        local n=$1 out=$2
        shift 2
        MPIEXEC_TIMEOUT=60 "$MPIEXEC" -n "$n" "$train" "${small[@]}" "$@" \
            --dump "$out.f32" >"$out.log" 2>&1 </dev/null
    }
    # moe_steps FILE: step, loss, aux loss and dropped count of every step line
    moe_steps() { awk '/^step [0-9]+ loss / { print $2, $4, $6, $8 }' "$1"; }

    # moe_same NAME N E G ARGS...: N ranks against 1, both with E experts, G groups
    moe_same() {
        local name="moe $1 -n $2 = 1 rank" n=$2 e=$3 g=$4 t0 rc1 rc2 took
        local a=$dir/${1// /_}.$n b=$dir/${1// /_}.$n.one
        shift 4
        t0=$(now)
        moe_train "$n" "$a" --experts "$e" --moe-groups "$g" "$@"
        rc1=$?
        moe_train 1 "$b" --experts "$e" --moe-groups "$g" "$@"
        rc2=$?
        took=$(since "$t0")
        cp "$a.log" "$log"
        local drops want
        drops=$(grep -o 'dropped [0-9]* of [0-9]*' "$a.log")
        want=$(grep -o 'dropped [0-9]* of [0-9]*' "$b.log")
        if [ "$rc1$rc2" != 00 ]; then
            cat "$b.log" >>"$log"
            report "$name" 0 "exit statuses $rc1 and $rc2, want 0 0  [$took]"
        elif [ "$(moe_steps "$a.log" | wc -l)" != 5 ] ||
             [ "$(moe_steps "$a.log")" != "$(moe_steps "$b.log")" ]; then
            printf 'the 1-rank run:\n' >>"$log"
            cat "$b.log" >>"$log"
            report "$name" 0 "the step lines (loss, aux, dropped) differ  [$took]"
        elif [ -z "$drops" ] || [ "$drops" != "$want" ]; then
            report "$name" 0 "'$drops', want '$want'  [$took]"
        elif ! cmp -s "$a.f32" "$b.f32"; then
            report "$name" 0 "the weights differ from the 1-rank run's  [$took]"
        else
            report "$name" 1 "weights byte-equal, $drops  [$took]"
        fi
    }
    moe_same top-1 2 4 2
    moe_same top-1 3 6 3
    moe_same top-1 4 8 4
    moe_same "1 expert a rank, top-2" 5 5 5 --topk 2
    moe_same "4 groups" 2 4 4
    moe_same top-2 3 6 3 --topk 2 --aux-loss 0.5
    moe_same "capacity 0.5" 4 8 4 --capacity 0.5
    moe_same "adam gelu 5 layers" 3 3 6 --optim adam --lr 0.01 --act gelu --layers 5 \
        --capacity 2
    # The GPT: 4 blocks, the MLPs of blocks 1 and 3 experts, and 5 steps of 12
    # sequences of 8 bytes, 96 tokens a group of 4 sequences
    local mlp=("${small[@]}")
    small=(--mode moe --model gpt --steps 5 --batch 12 --seq 8 --embed 16 --heads 2
           --layers 4)
    moe_same "gpt top-2" 3 6 3 --topk 2 --capacity 1.5
    moe_same "gpt adam" 2 4 2 --optim adam --lr 0.01
    # One expert that takes every token (capacity 1: T slots; softmax of one: p = 1; no
    # aux loss) is the dense block: expert 0 starts as its MLP, and y = x2 + 1 * mlp
    # adds what the dense block adds. So the weights equal serial training's, byte for
    # byte, once the gate (embed + 1 floats after block 1's attention part) is cut out.
    moe_train 1 "$dir/gpt1" --layers 2 --experts 1 --capacity 1 --aux-loss 0
    local rc1=$? rc2
    MPIEXEC_TIMEOUT=60 "$MPIEXEC" -n 1 "$train" "${small[@]:2}" --layers 2 \
        --dump "$dir/dense.f32" >"$dir/dense.log" 2>&1 </dev/null
    rc2=$?
    cp "$dir/gpt1.log" "$log"
    local C=16 V=256 S=8 F=64 at gate
    # floats before the gate: the embeddings, block 0, block 1's attention part
    at=$(( (V + S) * C + (4 * C * C + 8 * C) + (F * C + F + C * F + C)
           + (4 * C * C + 8 * C) ))
    gate=$(( C + 1 ))
    if [ "$rc1$rc2" != 00 ]; then
        cat "$dir/dense.log" >>"$log"
        report "moe gpt, 1 expert = the dense GPT, serial" 0 "exit statuses $rc1 and $rc2"
    elif cmp -s <(head -c $((4 * at)) "$dir/gpt1.f32") <(head -c $((4 * at)) "$dir/dense.f32") &&
         cmp -s <(tail -c +$((4 * (at + gate) + 1)) "$dir/gpt1.f32") \
                <(tail -c +$((4 * at + 1)) "$dir/dense.f32") &&
         [ "$(stat -c %s "$dir/gpt1.f32")" = $(( $(stat -c %s "$dir/dense.f32") + 4 * gate )) ]; then
        report "moe gpt, 1 expert = the dense GPT, serial" 1 "weights byte-equal, the gate aside"
    else
        report "moe gpt, 1 expert = the dense GPT, serial" 0 "the weights differ from serial training's"
    fi
    small=("${mlp[@]}")

    # a capacity that drops: at least a third of the choices must have been dropped
    local d
    d=$(grep -o 'dropped [0-9]* of [0-9]*' "$dir/capacity_0.5.4.log" |
        awk '{ print ($2 * 3 >= $4) }')
    report "moe --capacity 0.5 drops tokens" "${d:-0}" \
        "$(grep -o 'dropped [0-9]* of [0-9]*' "$dir/capacity_0.5.4.log")"

    # the loss goes down; the measured dispatch bytes equal the model's (N-1) x slots
    local first last model meas
    moe_train 3 "$dir/long" --steps 20 --topk 2
    first=$(awk '/^step 1 loss/ { print $4 }' "$dir/long.log")
    last=$(awk '/^step 20 loss/ { print $4 }' "$dir/long.log")
    cp "$dir/long.log" "$log"
    if awk -v a="$first" -v b="$last" \
        'BEGIN { exit !(a != "" && b != "" && b < 0.8 * a) }'; then
        report "moe -n 3: the loss goes down" 1 "step 1 $first, step 20 $last"
    else
        report "moe -n 3: the loss goes down" 0 "step 1 '$first', step 20 '$last'"
    fi
    model=$(tr -s ' \n' ' ' <"$dir/long.log" | grep -o '(N-1) x [0-9]* = [0-9]* bytes' |
            awk '{ print $5 }')
    meas=$(grep 'measured, the last dispatch' "$dir/long.log" | awk -F: '{ print $2 }')
    if [ -n "$model" ] && [ "$(echo $meas)" = "$model $model $model" ]; then
        report "moe -n 3: all-to-all bytes = the model's" 1 "$model bytes per rank"
    else
        report "moe -n 3: all-to-all bytes = the model's" 0 \
            "model '$model', measured '$meas'"
    fi

    # moe_bad NAME N ARGS...: exit 2 on every rank, soon, and a sentence from train
    moe_bad() {
        local name="moe refuses $1 -n $2" n=$2
        shift 2
        run "$name" 2 env MPIEXEC_TIMEOUT=30 "$MPIEXEC" -n "$n" "$train" "${small[@]}" "$@"
        grep -q '^train: ..' "$log" || report "$name: a sentence" 0 "none on stderr"
    }
    moe_bad "3 experts" 2 --experts 3
    moe_bad "--topk 2 of 1 expert" 1 --experts 1 --topk 2
    moe_bad "3 groups" 2 --moe-groups 3
    moe_bad "--batch 50 in 4 groups" 2 --batch 50 --moe-groups 4
    moe_bad "--layers 2" 2 --layers 2
    moe_bad "fp16" 2 --precision fp16
    moe_bad "a checkpoint" 2 --checkpoint "$dir/ckpt"
    moe_bad "--accum 2" 2 --accum 2
    moe_bad "--capacity 0" 2 --capacity 0
    moe_bad "--topk 3" 2 --topk 3
    moe_bad "--experts in ddp" 2 --mode ddp --experts 4
    small=(--mode moe --model gpt --steps 5 --batch 12 --seq 8 --embed 16 --heads 2)
    moe_bad "gpt --layers 1" 2 --layers 1
    moe_bad "gpt --batch 12 in 8 groups" 2 --layers 2 --experts 4 --moe-groups 8
    small=("${mlp[@]}")

    # a trace the viewer replays
    local trace=$dir/moe.trace png=$dir/moe.png
    run "moe -n 3 --trace" 0 env MPIEXEC_TIMEOUT=60 "$MPIEXEC" -n 3 "$train" \
        "${small[@]}" --quiet --trace "$trace"
    local a2a fwd
    a2a=$(awk '$4 == "send" && $6 ~ /^alltoall/' "$trace" 2>/dev/null | wc -l)
    fwd=$(awk '$4 == "compute" && $7 == "forward"' "$trace" 2>/dev/null | wc -l)
    if [ "$a2a" -gt 0 ] && [ "$fwd" -gt 0 ]; then
        report "moe trace: all-to-all sends and compute" 1 "sends $a2a, forward $fwd"
    else
        report "moe trace: all-to-all sends and compute" 0 "sends $a2a, forward $fwd"
    fi
    if [ -x "$BUILD/dtviz" ]; then
        run "dtviz --png --step 1 on the moe trace" 0 ${limit[@]+"${limit[@]}"} \
            "$BUILD/dtviz" --png "$png" --step 1 "$trace"
        [ "$(head -c 8 "$png" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = \
          89504e470d0a1a0a ] || report "dtviz drew the moe trace" 0 "no PNG"
    else
        missing dtviz "$BUILD/dtviz"
    fi

    # lesson 19 with top-2 (section 3 runs its defaults)
    local lesson=$BUILD/lessons/19_moe
    if [ -x "$lesson" ]; then
        run "19_moe --topk 2 -n 3" 0 env MPIEXEC_TIMEOUT=60 "$MPIEXEC" -n 3 "$lesson" \
            --topk 2 --steps 10
        grep -q 'PASS' "$log" || report "19_moe --topk 2 checks itself" 0 "no PASS"
    else
        missing 19_moe "$lesson"
    fi
}
