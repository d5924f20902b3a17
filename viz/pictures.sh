#!/usr/bin/env bash
# Redraws the docs' pictures (docs/viewer.md) with the viewer itself: `make pictures` (or
# `bash viz/pictures.sh BUILD`). Each command below is the one docs/viewer.md shows under
# its picture. The built-in schedules need nothing else; the training timetables come
# from traces that build/train writes first, so their timings are this machine's.
set -eu
BUILD=${1:-build}
MPIEXEC=${MPIEXEC:-mpiexec}
export MPIEXEC_TIMEOUT=${MPIEXEC_TIMEOUT:-120}
cd "$(dirname "$0")/.."
out=viz/pictures
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
viz() { "$BUILD/dtviz" --size 1200x680 "$@"; }

# the ring at 4 ranks: mid reduce-scatter (arrows, partial sums), then every chunk owned
viz --algo ring-allreduce --ranks 4 --step 1 --png "$out/ring-4-step1.png"
viz --algo ring-allreduce --ranks 4 --step 3 --png "$out/ring-4-step3.png"

# ring attention at 4 ranks: one step done (the K/V blocks moved one rank on, the
# diagonal blocks attended); the zig-zag cut two steps in
viz --algo ring-attention --ranks 4 --count 4096 --step 1 --png "$out/ring-attention-4-step1.png"
viz --algo ring-attention-zigzag --ranks 4 --count 4096 --step 2 \
    --png "$out/ring-attention-zigzag-4-step2.png"

# the two pipeline schedules as lib/schedule lays them out: the same bubble, not the
# same stash
viz --algo gpipe --stages 4 --micro 8 --cursor 11 --png "$out/pp-gpipe.png"
viz --algo 1f1b --stages 4 --micro 8 --cursor 10 --png "$out/pp-1f1b.png"

# today's schedules at the same P and M: interleaved 1F1B over 2 chunks a stage (the
# bubble cut by v, the stash and the messages grown), ZB-H1 (W filling the tail)
viz --algo interleaved --virtual 2 --stages 4 --micro 8 --cursor 10 \
    --png "$out/pp-interleaved.png"
viz --algo zb-h1 --stages 4 --micro 8 --cursor 7 --png "$out/pp-zb-h1.png"

# DDP's buckets as lib/schedule lays them out: two allreduces under backward, one after
viz --algo ddp --ranks 3 --layers 6 --buckets 3 --png "$out/ddp-buckets.png"

# a real pipeline run, 1F1B over 4 stages and 8 micro-batches: its second step
"$MPIEXEC" -n 4 "$BUILD/train" --mode pp --schedule 1f1b --micro 8 --steps 2 --hidden 1024 \
    --layers 8 --batch 512 --quiet --trace "$tmp/pp.trace" >/dev/null
viz "$tmp/pp.trace" --train-step 2 --png "$out/train-pp-1f1b.png"

# DDP at 3 ranks: the buckets' allreduces under the backward
"$MPIEXEC" -n 3 "$BUILD/train" --mode ddp --steps 2 --hidden 1024 --layers 4 --batch 384 \
    --bucket-kb 1024 --quiet --trace "$tmp/ddp.trace" >/dev/null
viz "$tmp/ddp.trace" --train-step 2 --png "$out/train-ddp.png"

# FSDP at 3 ranks: each layer gathered before its forward and backward, freed after
"$MPIEXEC" -n 3 "$BUILD/train" --mode fsdp --steps 2 --hidden 1024 --layers 4 --batch 384 \
    --quiet --trace "$tmp/fsdp.trace" >/dev/null
viz "$tmp/fsdp.trace" --train-step 2 --png "$out/train-fsdp.png"

# the same with --prefetch: each gather on fsdp's thread, under the layer before's compute
"$MPIEXEC" -n 3 "$BUILD/train" --mode fsdp --prefetch --steps 2 --hidden 1024 --layers 4 \
    --batch 384 --quiet --trace "$tmp/fsdp-prefetch.trace" >/dev/null
viz "$tmp/fsdp-prefetch.trace" --train-step 2 --png "$out/train-fsdp-prefetch.png"
# lesson 27's two traced passes at 3 ranks: the plain cut's timetable (attn s over kv s)
"$MPIEXEC" -n 3 "$BUILD/lessons/27_ring_attention" --seq 1536 --dim 64 --reps 2 \
    --trace "$tmp/ra.trace" >/dev/null
viz "$tmp/ra.trace" --view timetable --train-step 1 --png "$out/ring-attention-timetable.png"
echo "pictures written to $out/"
