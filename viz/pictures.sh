#!/usr/bin/env bash
# Redraws the README's pictures with the viewer itself: `make pictures` (or
# `bash viz/pictures.sh BUILD`). The built-in ring needs nothing else; the two training
# pictures come from traces that build/train writes here first, so their timings are
# this machine's.
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

# pipeline parallelism, 1F1B over 4 stages and 8 micro-batches: the bubble on the timeline
"$MPIEXEC" -n 4 "$BUILD/train" --mode pp --schedule 1f1b --micro 8 --steps 2 --hidden 1024 \
    --layers 8 --batch 512 --quiet --trace "$tmp/pp.trace" >/dev/null
viz --step 2 --png "$out/train-pp-1f1b.png" "$tmp/pp.trace"

# DDP at 3 ranks: buckets allreduced while backward still runs
"$MPIEXEC" -n 3 "$BUILD/train" --mode ddp --steps 2 --hidden 512 --batch 384 --bucket-kb 256 \
    --quiet --trace "$tmp/ddp.trace" >/dev/null
viz --step 4 --png "$out/train-ddp.png" "$tmp/ddp.trace"
echo "pictures written to $out/"
