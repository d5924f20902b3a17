#!/usr/bin/env bash
# dtlab's check on a lent GPU machine (GPU.md in the project's notes). Run it there from
# the root of the tree, with the folder that scripts/gpu-pack.sh made carried beside it:
#
#     bash scripts/gpu-check.sh [--budget SECONDS] [--dry-run] [--pack DIR] [--only RE]
#                               [--bench]
#
# Such a machine has CUDA and PyTorch but no MPI, and nothing can be installed. So:
#   1. set-up: the pack's .debs unpacked into a temporary folder (dpkg-deb, else ar and
#      tar, else Python: never into /), its programs unpacked beside them; PATH and
#      LD_LIBRARY_PATH point at them (MPICH's mpiexec.hydra, its libraries; cuBLAS from
#      the CUDA toolkit or PyTorch's nvidia packages, wherever the programs find it);
#      ldd on every program, nvidia-smi, and whether the pack was built from this tree
#   2. mpiexec on 2 ranks (with -launcher fork, then UCX_TLS=self,sm, where the plain
#      launch fails), and every rank on the GPU
#   3. --device cuda with the GPU hidden: refused on every rank, in CUDA's words; the
#      default falls back to the CPU and says so on stderr
#   4. the unit suites (the CUDA kernels against the CPU loops), the multi-rank suites at
#      1 to 4 ranks sharing the GPU (device buffers against MPI on host copies)
#   5. train in every mode on the GPU against the same run on the CPU (--dump: weights
#      equal to rounding), and against serial training on the GPU, each run's device
#      books saying its steps stayed on the GPU (lessons/train.c); fp16; the GPT
#      (--model gpt) in its modes on the GPU against the CPU; checkpoints written and
#      resumed on the GPU (bit for bit), and refused by a CPU run
#   6. traces: d2h and h2d staging events beside the sends and receives; train's
#      steps (serial, ddp -n 2) copy no tensor data between host and GPU (dt_memcpy's
#      copies in the trace, counted by dttrace)
#   7. every lesson with --device cuda at 4 ranks (22_hosts at 2); stress (random collectives on device
#      buffers against MPICH's) at 2, 4 and 8 ranks; collbench on device buffers
#   8. the transports (DT_P2P, lib/p2p.h): the multi-rank suites and stress with
#      DT_P2P=ipc and DT_P2P=staging at 2 and 4 ranks on device buffers; then, with
#      --bench, the benchmarks (names bench-*): bench-kernel (bench/gpubw: the reduction kernel
#      against a device-to-device copy), bench-coll-N (collbench's allreduce,
#      allgather, reduce_scatter, 1 MiB to 256 MiB, DT_P2P=ipc, DT_P2P=staging and
#      host buffers), bench-gloo-N (bench/gloo_bench.py: torch's gloo on CUDA tensors,
#      the same sizes and formulas), at N = 2, 4, 8 ranks on the one GPU; bench-ddp
#      (train --mode ddp, overlap on and off, beside the compute alone); bench-torch
#      (train --mode serial against PyTorch eager, bench/torch_step.py, fp32 and mixed
#      precision); bench-fsdp (ZeRO-3 with and without --prefetch); bench-ddp-mps and
#      bench-fsdp-mps (the same two under NVIDIA's MPS, where the machine has it);
#      bench-stage-N
#      (DT_P2P=staging in pieces of 1 MiB against each message staged whole). The
#      ratios come last, before the table, and into gpu-bench.txt
# Every run has a time limit (timeout, and MPIEXEC_TIMEOUT on every mpiexec). A run in
# which some rank fell back to the CPU fails, and so does a lesson that says its work
# stayed on the host ("on the CPU: ..."). A check that fails on the GPU runs once more
# with DT_SYNC=1 (at most SYNC_AGAIN, default 6, where the budget has room), and its row
# says whether it passes so: if it does, a wait is missing where results change hands. Each check has an estimated cost: one that
# would not fit in what is left of --budget (default 480 s, counted from the start: the
# checks of correctness took about 300 s on an H200) is skipped, the table says so, and the
# run fails unless --only chose the checks (a check that finds nothing to run is a SKIP
# with its reason, not a failure). The table comes last: check, PASS/FAIL/SKIP, seconds.
#
# Logs: one per check, in gpu-check-logs.tar.gz (the benchmarks' CSVs too), the table,
# gpu-check-table.txt, and the benchmarks' ratios, gpu-bench.txt, under $OUT when it is set (the device tool brings those back), else in a temporary
# folder named at the end. Exit status 0 when nothing failed.
#
# --only RE runs only the checks whose names match the extended regular expression RE
# (and the set-up and mpiexec's start, always): a short rerun of what failed.
# --bench adds the measurements (the checks named bench-*: a few minutes more than the
# checks of correctness, which alone fit the default budget and one call of a lent
# machine); `--bench --only bench-` runs the measurements alone.
# --dry-run runs every command line on this machine's CPU (--device cpu, DT_DEVICE=cpu):
# the same pack, unpacking and environment, so that every line is known to be valid
# before the one run on a GPU (the benchmarks on small sizes). DT_UNPACK=dpkg|ar|python
# forces one way of unpacking; DT_PYTHON names the python3 that runs gloo_bench.py (one
# with torch), default python3 (without torch its checks are SKIP).
set -u

cd "$(dirname "$0")/.." || exit 1
SECONDS=0
budget=480
dry=0
only=""
bench=0
PACK=gpu-pack

usage() {
    sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit "$1"
}
while [ $# -gt 0 ]; do
    case $1 in
        --budget) [[ "${2:-}" =~ ^[0-9]+$ ]] || usage 2; budget=$2; shift 2 ;;
        --dry-run) dry=1; shift ;;
        --bench) bench=1; shift ;;
        --pack) [ -n "${2:-}" ] || usage 2; PACK=$2; shift 2 ;;
        --only) [ -n "${2:-}" ] || usage 2; only=$2; shift 2 ;;
        -h|--help) usage 0 ;;
        *) echo "gpu-check: unknown argument '$1'" >&2; usage 2 ;;
    esac
done
DEV=cuda
[ "$dry" = 1 ] && DEV=cpu
[ -d "$PACK/debs" ] && [ -f "$PACK/bins.tar.xz" ] ||
    { echo "gpu-check: no pack in $PACK/ (run scripts/gpu-pack.sh and carry it)" >&2; exit 1; }
PACK=$(cd "$PACK" && pwd)

# the work folder: in TMPDIR, unless programs cannot run there (noexec), then beside
# the pack (gpu-pack.work.*, ignored by git)
work=$(mktemp -d "${TMPDIR:-/tmp}/dtlab-gpu.XXXXXX") || exit 1
printf '#!/bin/sh\nexit 0\n' >"$work/exec-test" && chmod +x "$work/exec-test"
if ! "$work/exec-test" 2>/dev/null; then
    rm -rf "$work"
    work=$(mktemp -d "$(dirname "$PACK")/gpu-pack.work.XXXXXX") || exit 1
fi
rm -f "$work/exec-test"
deps=$work/deps          # MPICH and the libraries only the pack has
base=$work/base          # zlib, libudev, libnuma: used only where the machine lacks them
bin=$work/bin            # the programs
logs=$work/logs
w=$work/files            # dumps, checkpoints, traces
res=${OUT:-$work/out}
mkdir -p "$deps" "$base" "$bin" "$logs" "$w" "$res" || exit 1

# ==== reporting ====

rows=()                  # "RESULT|name|seconds|detail"
npass=0 nfail=0 nskip=0 nchecks=0
console=$logs/000-console.log

say() { printf '%s\n' "$*" | tee -a "$console"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# row RESULT NAME SECONDS DETAIL: one line of the table, printed now and kept
row() {
    rows+=("$1|$2|$3|$4")
    case $1 in PASS) npass=$((npass + 1)) ;; FAIL) nfail=$((nfail + 1)) ;;
               SKIP) nskip=$((nskip + 1)) ;; esac
    say "$(printf '%-4s  %-44s %6s s  %s' "$1" "$2" "$3" "$4")"
    snapshot
}

# The table and the logs so far, under $res after every check: a run killed from
# outside (the device tool's limit) still brings back what it did
snapshot() {
    table >"$res/gpu-check-table.txt"
    tar -czf "$res/gpu-check-logs.tar.gz" -C "$work" logs 2>/dev/null
}

# table [WIDTH]: the table; details cut to WIDTH characters for PASS rows (the console
# keeps the whole table within what a device call shows, 12,000 characters)
table() {
    local r res_ name secs detail
    printf '%-44s  %-6s %7s  %s\n' check result seconds detail
    for r in "${rows[@]}"; do
        IFS='|' read -r res_ name secs detail <<<"$r"
        [ -n "${1:-}" ] && [ "$res_" = PASS ] && [ "${#detail}" -gt "$1" ] &&
            detail="${detail:0:$(($1 - 3))}..."
        printf '%-44s  %-6s %7s  %s\n' "$name" "$res_" "$secs" "$detail"
    done
    printf '%d passed, %d failed, %d skipped in %d s (budget %d s)%s; %s\n' "$npass" \
        "$nfail" "$nskip" "$SECONDS" "$budget" "$([ "$dry" = 1 ] && echo ', DRY RUN on the CPU')" \
        "${gpu_name:-no GPU named}"
}

# ==== the benchmarks' ratios (section 8), printed before the table ====
# bench_report: one compact table from the files bench-* left in $bw; nothing when no
# benchmark ran. busbw of a row: the better of its out-of-place and in-place cells
# (all_reduce on gloo runs in place only; its allgather and reduce_scatter out of place).
kv() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" "$2" | tail -n 1; }   # KEY FILE: a value
bench_report() {
    [ -n "${bw:-}" ] && [ -n "$(ls "$bw" 2>/dev/null)" ] || return 0
    local k=$bw/kernel.txt copy="" n f
    [ -s "$k" ] && copy=$(kv copy_GBps "$k")
    echo "==== gpu-bench: the transports' ratios, one run: ${gpu_name:-no GPU named}$([ "$dry" = 1 ] && echo ', DRY RUN on the CPU (small sizes: the layout, not the numbers)') ===="
    if [ -s "$k" ]; then
        echo "kernel (bench/gpubw, $(kv device "$k")): reduce $(kv reduce_GBps "$k") GB/s," \
             "D2D copy $(kv copy_GBps "$k") (copy+sync $(kv copysync_GBps "$k")):" \
             "reduce/copy+sync $(kv ratio "$k"), reduce/copy $(kv ratio_bare "$k") (aim 0.9);" \
             "pinned h2d $(kv h2d_GBps "$k"), d2h $(kv d2h_GBps "$k") GB/s"
    else
        echo "kernel: not measured (bench-kernel did not run or failed)"
    fi
    for n in 2 4 8; do
        for f in "$bw/coll-$n-ipc.p2p" "$bw/coll-$n-staging.p2p" "$bw/coll-$n-host.p2p" \
                 "$bw/coll-$n-ipc-mps.p2p"; do
            [ -s "$f" ] && echo "  -n $n transport: $(cat "$f")"
        done
    done
    local files
    files=$(ls "$bw"/coll-*-*.csv "$bw"/gloo-*.csv 2>/dev/null)
    [ -n "$files" ] &&
    echo "busbw in GB/s (collbench's and gloo_bench's formulas); copy = the D2D copy's GB/s above" &&
    awk -F, -v copy="$copy" '
        function best(a, b) { return a == "" ? b : b == "" ? a : (a + 0 > b + 0 ? a : b) }
        function num(x) { return x == "" ? "-" : sprintf("%.1f", x) }
        function ratio(a, b, d) { return (a == "" || b == "" || b + 0 == 0) ? "-" : sprintf("%." d "f", a / b) }
        FNR == 1 { nf = split(FILENAME, p, "/"); file = p[nf]; cfg = "host"
                   if (file ~ /^gloo-/) cfg = "gloo"
                   else if (file ~ /-ipc\.csv$/) cfg = "ipc"
                   else if (file ~ /-ipc-mps\.csv$/) cfg = "mps"
                   else if (file ~ /-staging\.csv$/) cfg = "staging"
                   next }
        { key = $1 SUBSEP $16 SUBSEP $3
          seen[key] = 1; v[key, cfg] = best($10, $14)
          if (!($3 in isz)) { isz[$3] = 1; sz[++ns] = $3 + 0 } }
        END {
            for (i = 2; i <= ns; i++)                       # the sizes, ascending
                for (j = i; j > 1 && sz[j - 1] > sz[j]; j--) { t = sz[j]; sz[j] = sz[j - 1]; sz[j - 1] = t }
            printf "%-14s %2s %6s %8s %8s %8s %8s %8s  %8s %8s %8s %8s\n", "coll", "n", "size",
                   "ipc", "ipc+mps", "staging", "host", "gloo", "ipc/copy", "mps/copy",
                   "ipc/gloo", "ipc/stag"
            nc = split("allreduce allgather reduce_scatter", cl, " ")
            for (c = 1; c <= nc; c++) for (n = 2; n <= 8; n *= 2) for (i = 1; i <= ns; i++) {
                key = cl[c] SUBSEP n SUBSEP sz[i]
                if (!(key in seen)) continue
                a = v[key, "ipc"]; s = v[key, "staging"]; h = v[key, "host"]; g = v[key, "gloo"]
                m = v[key, "mps"]
                mb = sz[i] / 1048576
                printf "%-14s %2d %5dM %8s %8s %8s %8s %8s  %8s %8s %8s %8s\n", cl[c], n, mb,
                       num(a), num(m), num(s), num(h), num(g), ratio(a, copy, 3),
                       ratio(m, copy, 3), ratio(a, g, 1), ratio(a, s, 1)
                if (mb >= 64 && a != "") {
                    big++
                    if (copy != "" && a / copy >= 0.3) okc++
                    if (g != "" && g > 0 && a / g >= 10) okg++
                    if (g != "") withg++
                }
            }
            printf "aims at >= 64 MiB: ipc busbw >= 0.3 x copy in %d of %d rows%s; ipc >= 10 x gloo in %d of %d rows\n",
                   okc, big, copy == "" ? " (no copy measured)" : "", okg, withg
        }' $files </dev/null
    local any=0
    for f in "$bw"/ddp-2.txt "$bw"/ddp-4.txt "$bw"/ddp-2-mps.txt "$bw"/ddp-4-mps.txt; do
        [ -s "$f" ] || continue
        [ "$any" = 1 ] || printf '%-22s %9s %9s %11s %7s %13s\n' "ddp (train, $DEV)" "on ms" \
            "off ms" "compute ms" "off/on" "hidden share"
        any=1
        awk -v mps="$([[ "$f" == *-mps.txt ]] && echo ', MPS')" '{ c = $3 - $4
               printf "%-22s %9.3f %9.3f %11.3f %7.2f %13s\n", "-n " $1 mps, $2, $3, $4,
               $3 / $2, (c > 0 ? sprintf("%.2f", ($3 - $2) / c) : "- (no comm?)") }' "$f"
    done
    [ "$any" = 1 ] && echo "hidden share = (off - on) / (off - compute): of the time that communication adds without overlap, the part overlap hides"
    any=0
    for f in "$bw/fsdp-4.txt" "$bw/fsdp-4-mps.txt"; do
        [ -s "$f" ] || continue
        [ "$any" = 1 ] || printf '%-22s %9s %9s %11s %13s\n' "fsdp zero 3 ($DEV)" "prefetch" \
            "without" "compute ms" "hidden share"
        any=1
        awk -v mps="$([[ "$f" == *-mps.txt ]] && echo ', MPS')" '{ c = $3 - $4
               printf "%-22s %9.3f %9.3f %11.3f %13s\n", "-n " $1 mps, $2, $3, $4,
               (c > 0 ? sprintf("%.2f", ($3 - $2) / c) : "-") }' "$f"
    done
    if [ -s "$bw/torch.txt" ]; then
        printf '%-16s %6s %6s %10s %10s %12s\n' "step vs torch" batch prec "dtlab ms" \
            "torch ms" "dtlab/torch"
        awk '{ printf "%-16s %6d %6s %10.3f %10.3f %12.2f\n", $1, $2, $3, $4, $5, $4 / $5 }' \
            "$bw/torch.txt"
        echo "step vs torch: train --mode serial against bench/torch_step.py, mean step after warm-up, the batch up and the loss back each step; fp32 = TF32 off on both, fp16 = dtlab --precision fp16 against autocast + GradScaler (aim: at or below 1)"
    fi
    files=$(ls "$bw"/stage-*-*.csv 2>/dev/null)
    [ -n "$files" ] &&
    echo "DT_P2P=staging, busbw GB/s: in pieces of 1 MiB (DT_STAGE_KIB=1024) against each message staged whole (DT_STAGE_KIB=0)" &&
    awk -F, '
        FNR == 1 { kind = FILENAME ~ /-0\.csv$/ ? "whole" : "pieces"; next }
        { key = $1 SUBSEP $16 SUBSEP $3; b = $10 > $14 ? $10 : $14; v[key, kind] = b
          if (!(key in seen)) { seen[key] = 1; order[++nk] = key } }
        END {
            printf "%-14s %2s %6s %8s %8s %13s\n", "coll", "n", "size", "pieces", "whole", "pieces/whole"
            for (i = 1; i <= nk; i++) {
                split(order[i], k, SUBSEP)
                p = v[order[i], "pieces"]; w = v[order[i], "whole"]
                printf "%-14s %2d %5dM %8.2f %8.2f %13s\n", k[1], k[2], k[3] / 1048576, p, w,
                       (w > 0 ? sprintf("%.2f", p / w) : "-")
            }
        }' $files </dev/null
    return 0
}

finished=0
finish() {
    [ "$finished" = 1 ] && return
    finished=1
    declare -F mps_down >/dev/null && mps_down
    table >"$logs/gpu-check-table.txt"
    bench_report >"$logs/gpu-bench.txt" 2>&1
    if [ -s "$logs/gpu-bench.txt" ]; then
        cp "$logs/gpu-bench.txt" "$res/gpu-bench.txt"
        echo
        cat "$logs/gpu-bench.txt"
    fi
    snapshot
    echo
    echo "==== gpu-check: the table (PASS details cut; whole in gpu-check-table.txt) ===="
    table 36
    echo "(logs: $res/gpu-check-logs.tar.gz, table: $res/gpu-check-table.txt)"
}
trap 'finish' EXIT
trap 'say "gpu-check: interrupted"; exit 130' INT TERM

# ==== running things under time limits ====

TIMEOUT=()
command -v timeout >/dev/null && TIMEOUT=(timeout -k 5)
deadline=0               # when the current check must end (bash SECONDS)

left() { local l=$((deadline - SECONDS)); [ "$l" -ge 5 ] || l=5; echo "$l"; }

# mpi N PROGRAM ARGS...: the pack's mpiexec at N ranks, within the check's time
mpi() {
    local n=$1 l
    shift
    l=$(left)
    echo "+ mpiexec -n $n ${*#$bin/}  (MPIEXEC_TIMEOUT=$l)"
    MPIEXEC_TIMEOUT=$l ${TIMEOUT[@]+"${TIMEOUT[@]}" $((l + 10))} "${MPIEXEC[@]}" -n "$n" \
        "$@" </dev/null
}

# tl PROGRAM ARGS...: a program without mpiexec, within the check's time
tl() {
    local l
    l=$(left)
    echo "+ ${*#$bin/}  (limit $l s)"
    ${TIMEOUT[@]+"${TIMEOUT[@]}" "$l"} "$@" </dev/null
}

# Where a program says a rank fell back to the CPU (lib/core.c, the suites' notes)
FELL_BACK='no GPU found|no usable GPU|running on the CPU|no GPU here|not every rank has a GPU|GPU comparisons skipped'

# check NAME EST FUNC ARGS...: runs FUNC ARGS, its output into the check's own log, when
# the budget has EST seconds left (else SKIP), within 3*EST+30 s (EST 0: set-up, never
# skipped, within 120 s). FUNC returns 0 for a
# pass and may set `detail` (the table's last column), `cpu_ok=1` (a run on the CPU
# is what it tests) and `skipped=REASON` (nothing to run here: a SKIP row). needs_mpi=1 before a call: skipped when mpiexec does not work.
needs_mpi=1
mpi_ok=1
check() {
    local name=$1 est=$2 t0 rc l secs
    shift 2
    if [ -n "$only" ] && [ "$est" != 0 ] && [[ "$name" != mpiexec* ]] &&
       ! grep -Eq -- "$only" <<<"$name"; then
        return 0                          # not asked for: no row
    fi
    [[ "$name" == bench-* ]] && [ "$bench" = 0 ] && return 0     # --bench: no row
    nchecks=$((nchecks + 1))
    log=$logs/$(printf '%03d' "$nchecks")-$(printf '%s' "$name" | tr -c 'A-Za-z0-9._-' '_' | cut -c1-60).log
    l=$((budget - SECONDS))
    if [ "$est" -gt "$l" ]; then
        row SKIP "$name" 0 "over the budget: needs ~$est s, $l s left"
        return
    fi
    if [ "$needs_mpi" = 1 ] && [ "$mpi_ok" = 0 ]; then
        row SKIP "$name" 0 "mpiexec does not work here (see the first checks)"
        return
    fi
    l=$((3 * est + 30))
    [ "$l" -le $((budget - SECONDS + 30)) ] || l=$((budget - SECONDS + 30))
    [ "$est" != 0 ] || l=120
    deadline=$((SECONDS + l))
    detail="" cpu_ok=0 skipped=""
    t0=$(now)
    echo "# $name (estimated $est s, limit $l s)" >"$log"
    "$@" >>"$log" 2>&1 </dev/null
    rc=$?
    secs=$(since "$t0")
    if grep -q 'APPLICATION TIMED OUT' "$log"; then
        rc=1 detail="timed out (a hang?)${detail:+; $detail}"
    elif [ "$rc" = 0 ] && [ "$dry" = 0 ] && [ "$cpu_ok" = 0 ] && grep -Eq "$FELL_BACK" "$log"; then
        rc=1 detail="a rank ran on the CPU: $(grep -Em1 "$FELL_BACK" "$log" | cut -c1-80)"
    fi
    if [ "$rc" = 0 ] && [ -n "$skipped" ]; then
        row SKIP "$name" "$secs" "$skipped"
    elif [ "$rc" = 0 ]; then
        row PASS "$name" "$secs" "$detail"
    else
        [ -n "$detail" ] || detail="exit $rc$(grep -m1 '^dtlab: ' "$log" | cut -c1-90 |
                                               sed 's/^/: /')"
        sync_again "$name" "$est" "$@"
        row FAIL "$name" "$secs" "$detail"
        tail -n 25 "$log" | sed 's/^/      | /' | tee -a "$console"
    fi
}

# sync_again NAME EST CMD...: a check that failed on the GPU runs once more with DT_SYNC=1
# (the host waits after every kernel and product: lib/device.cu, "Queued work"), and its
# detail says how that went: passing then points at a wait missing where results change
# hands. At most SYNC_AGAIN (default 6) such runs, each only where the budget has room
# for it; not for the measurements, and not in a dry run.
sync_left=${SYNC_AGAIN:-6}
sync_again() {
    local name=$1 est=$2 d=$detail rc
    shift 2
    [ "$dry" = 0 ] && [ "$sync_left" -gt 0 ] && [[ "$name" != bench-* ]] &&
        [ $((budget - SECONDS)) -gt $((2 * est + 10)) ] || return 0
    grep -q '^on the CPU: ' "$log" && return 0     # it said why: on the host, by design
    sync_left=$((sync_left - 1))
    echo "# ---- again with DT_SYNC=1 ----" >>"$log"
    (export DT_SYNC=1; "$@") >>"$log" 2>&1 </dev/null
    rc=$?
    grep -q 'APPLICATION TIMED OUT' <(sed -n '/^# ---- again with DT_SYNC=1/,$p' "$log") && rc=1
    detail="$d; with DT_SYNC=1 it $([ "$rc" = 0 ] && echo 'PASSES: a missing wait?' || echo 'fails too')"
}

# ==== 1. set-up ====

say "gpu-check: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname 2>/dev/null), $(nproc 2>/dev/null) cores," \
    "budget $budget s$([ "$dry" = 1 ] && echo ', DRY RUN: every run on the CPU')"
say "gpu-check: work folder $work; results into $res"

# unpack_deb DEB DIR: the files of a .deb under DIR: dpkg-deb, else ar and tar, else
# Python (a .deb is an ar archive holding data.tar.*)
unpack_deb() {
    local deb=$1 dir=$2 how=${DT_UNPACK:-} t
    if { [ -z "$how" ] || [ "$how" = dpkg ]; } && command -v dpkg-deb >/dev/null; then
        dpkg-deb -x "$deb" "$dir" && { echo dpkg-deb; return 0; }
    fi
    if { [ -z "$how" ] || [ "$how" = ar ]; } && command -v ar >/dev/null; then
        t=$(mktemp -d "$work/ar.XXXXXX")
        if (cd "$t" && ar x "$deb" && tar -xf data.tar.* -C "$dir"); then
            rm -rf "$t"
            echo "ar and tar"
            return 0
        fi
        rm -rf "$t"
    fi
    if { [ -z "$how" ] || [ "$how" = python ]; } && command -v python3 >/dev/null; then
        python3 - "$deb" "$dir" <<'EOF' && { echo python3; return 0; }
import io, sys, tarfile
deb, dest = sys.argv[1], sys.argv[2]
data = open(deb, "rb").read()
if data[:8] != b"!<arch>\n":
    sys.exit(deb + ": not a .deb (ar archive)")
pos = 8
while pos + 60 <= len(data):
    name = data[pos:pos + 16].decode().strip().rstrip("/")
    size = int(data[pos + 48:pos + 58])
    if name.startswith("data.tar"):
        with tarfile.open(fileobj=io.BytesIO(data[pos + 60:pos + 60 + size])) as t:
            if hasattr(tarfile, "fully_trusted_filter"):
                t.extractall(dest, filter="fully_trusted")
            else:
                t.extractall(dest)
        sys.exit(0)
    pos += 60 + size + size % 2
sys.exit(deb + ": no data.tar inside")
EOF
    fi
    return 1
}

# unpack_tar FILE DIR: a .tar.xz, with tar and xz, else Python
unpack_tar() {
    if [ "${DT_UNPACK:-}" != python ] && command -v xz >/dev/null &&
       tar -xJf "$1" -C "$2" 2>/dev/null; then
        echo "tar and xz"
        return 0
    fi
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
        "$1" "$2" && echo python3
}

setup_unpack() {
    local d how="" dir
    for d in "$PACK"/debs/*.deb; do
        case ${d##*/} in zlib1g_*|libudev1_*|libnuma1_*) dir=$base ;; *) dir=$deps ;; esac
        how=$(unpack_deb "$d" "$dir") || { echo "cannot unpack $d"; return 1; }
        echo "unpacked ${d##*/} into ${dir#$work/} ($how)"
    done
    local tool
    tool=$(unpack_tar "$PACK/bins.tar.xz" "$bin") || { echo "cannot unpack bins.tar.xz"; return 1; }
    [ -x "$deps/usr/bin/mpiexec.hydra" ] || { echo "no mpiexec.hydra in the .debs"; return 1; }
    detail="debs: $how; programs: $tool; $(du -sh "$work" | cut -f1) unpacked"
}
needs_mpi=0
check "set-up: unpack the pack" 0 setup_unpack
[ -x "$deps/usr/bin/mpiexec.hydra" ] || { say "gpu-check: nothing to run without the pack"; exit 1; }

orig_ld=${LD_LIBRARY_PATH:-}
# MPICH's libraries, and OpenBLAS's (Debian keeps it in a folder of its own, which
# update-alternatives links into the plain one: not done for an unpacked .deb)
ML=$deps/usr/lib/x86_64-linux-gnu:$deps/usr/lib/x86_64-linux-gnu/openblas-pthread
export PATH="$deps/usr/bin:$PATH"
export LD_LIBRARY_PATH="$ML${orig_ld:+:$orig_ld}:$base/usr/lib/x86_64-linux-gnu:$base/lib/x86_64-linux-gnu"
MPIEXEC=("$deps/usr/bin/mpiexec.hydra")
# Check's per-test limit (4 s) is for a warm CPU; CUDA's start-up in each forked test
# is not
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-5}
progs=()
while IFS= read -r f; do progs+=("$f"); done < <(find "$bin" -type f -perm -u+x | sort)

ldd_of() {
    if command -v ldd >/dev/null; then ldd "$1"; else LD_TRACE_LOADED_OBJECTS=1 "$1"; fi
}

# Libraries no program finds: cuBLAS is looked for in PyTorch's nvidia packages and in
# every CUDA toolkit, and its folder put into LD_LIBRARY_PATH after MPICH's
missing_libs() {
    local f
    for f in "${progs[@]}" "$deps/usr/bin/mpiexec.hydra" "$deps/usr/bin/hydra_pmi_proxy"; do
        ldd_of "$f" 2>&1 | awk -v p="${f#$bin/}" '/not found/ { print $1, p }'
    done
}
setup_ldd() {
    local miss name found dirs d extra=""
    miss=$(missing_libs)
    if [ -n "$miss" ]; then
        echo "missing before the search:"; echo "$miss"
        dirs=$(LD_LIBRARY_PATH=$orig_ld python3 -c \
               'import nvidia; print("\n".join(nvidia.__path__))' 2>/dev/null)
        for name in $(awk '{ print $1 }' <<<"$miss" | sort -u); do
            found=$(find $dirs /usr/local/cuda/lib64 /usr/local/cuda/targets/*/lib \
                    /usr/local/cuda-*/lib64 -name "$name" 2>/dev/null | head -n 1)
            [ -n "$found" ] || continue
            d=$(dirname "$found")
            case ":$extra:" in *":$d:"*) ;; *) extra=${extra:+$extra:}$d ;; esac
        done
        if [ -n "$extra" ]; then
            export LD_LIBRARY_PATH="$ML:$extra${orig_ld:+:$orig_ld}:$base/usr/lib/x86_64-linux-gnu:$base/lib/x86_64-linux-gnu"
            echo "added to LD_LIBRARY_PATH: $extra"
        fi
        miss=$(missing_libs)
    fi
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    echo "== ldd train"; ldd_of "$bin/train"
    echo "== ldd mpiexec.hydra"; ldd_of "$deps/usr/bin/mpiexec.hydra"
    local mpich cublas
    mpich=$(ldd_of "$bin/train" | awk '/libmpich/ { print $3 }')
    cublas=$(ldd_of "$bin/train" | awk '/libcublas\./ { print $3 }')
    detail="${#progs[@]} programs; libmpich: ${mpich%/*}; cublas: ${cublas%/*}"
    if [ -n "$miss" ]; then
        detail="not found: $(awk '{ print $1 " (" $2 ")" }' <<<"$miss" | sort -u | head -n 5 | tr '\n' ' ')"
        return 1
    fi
    case $mpich in
        "$deps"/*) ;;
        *) detail="libmpich is not the pack's: $mpich"; return 1 ;;
    esac
}
check "set-up: ldd on every program" 0 setup_ldd

gpu_name=""
setup_smi() {
    if ! command -v nvidia-smi >/dev/null; then
        detail="no nvidia-smi here"
        [ "$dry" = 1 ]
        return
    fi
    nvidia-smi
    nvidia-smi -L
    gpu_name=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader |
               head -n 1)
    detail=$gpu_name
    [ -n "$gpu_name" ]
}
check "set-up: nvidia-smi" 0 setup_smi

# the pack against this tree's sources (the same hash as gpu-pack.sh's)
setup_sources() {
    local mine packed
    cat "$PACK/MANIFEST"
    packed=$(awk '$1 == "sources" { print $2 }' "$PACK/MANIFEST")
    mine=$(find lib lessons tests bench -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.py' \) \
           -not -path 'tests/grade/*' | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16)
    detail="$(sed -n 's/^commit //p' "$PACK/MANIFEST")"
    [ "$mine" = "$packed" ] || { detail="the programs were built from other sources than this tree's ($packed, here $mine): repack"; return 1; }
}
check "set-up: the pack matches this tree" 0 setup_sources

# ==== 2. mpiexec, and the GPU under it ====
# Hydra's plain launch first; where it fails, the fork launcher on localhost, then UCX
# kept to shared memory: the first that works is used from then on.
smoke_mpi() {
    local v
    cpu_ok=1
    for v in 0 1 2; do
        case $v in
            1) MPIEXEC=("$deps/usr/bin/mpiexec.hydra" -launcher fork -hosts localhost) ;;
            2) export UCX_TLS=self,sm ;;
        esac
        echo "== launch $v: ${MPIEXEC[*]#$deps/usr/bin/} ${UCX_TLS:+UCX_TLS=$UCX_TLS}"
        deadline=$((SECONDS + 25))              # a hang leaves time for the others
        if mpi 2 "$bin/lessons/01_hello" --device cpu; then
            detail="the pack's mpiexec.hydra"
            [ "$v" = 0 ] || detail="$detail; needed: ${MPIEXEC[*]:1} ${UCX_TLS:+UCX_TLS=$UCX_TLS}"
            return 0
        fi
    done
    MPIEXEC=("$deps/usr/bin/mpiexec.hydra")
    unset UCX_TLS
    return 1
}
needs_mpi=0
check "mpiexec -n 2 01_hello --device cpu" 30 smoke_mpi || true
grep -q '^PASS|mpiexec' <<<"${rows[-1]}" || mpi_ok=0
needs_mpi=1

# What runs mpiexec by its plain name (lesson 25 and scripts/elastic.sh, which read
# MPIEXEC too) gets the pack's, with the launch that worked: a wrapper first in PATH
# (the .deb carries only mpiexec.hydra, and the machine has no MPI). Lesson 25 looks for
# scripts/elastic.sh beside the folder its programs sit in: a link to this tree's.
mkdir -p "$work/mpibin"
{
    echo '#!/bin/sh'
    [ -n "${UCX_TLS:-}" ] && echo "export UCX_TLS=$UCX_TLS"
    printf 'exec'
    printf ' %q' "${MPIEXEC[@]}"
    echo ' "$@"'
} >"$work/mpibin/mpiexec"
chmod +x "$work/mpibin/mpiexec"
export PATH="$work/mpibin:$PATH" MPIEXEC="$work/mpibin/mpiexec"
ln -sfn "$PWD/scripts" "$work/scripts"

smoke_gpu() {
    mpi 2 "$bin/lessons/01_hello" --device "$DEV" >"$w/hello" 2>&1
    local rc=$?
    cat "$w/hello"
    [ "$rc" = 0 ] || return 1
    detail=$(sed -n 's/.*This rank 0 uses: //p' "$w/hello")
    [ "$dry" = 1 ] || [ "$(grep -c ' cuda:[0-9]' "$w/hello")" -ge 2 ]
}
check "01_hello -n 2 --device $DEV: on the GPU" 15 smoke_gpu

# ==== 3. asking for the GPU means the GPU ====
# With the GPU hidden (CUDA_VISIBLE_DEVICES empty), --device cuda stops every rank with
# a message in CUDA's words; the default runs on the CPU and says so on stderr alone.
refuse_hidden() {
    cpu_ok=1
    CUDA_VISIBLE_DEVICES='' mpi 2 "$bin/lessons/01_hello" --device cuda >"$w/r.out" 2>"$w/r.err"
    local rc=$?
    cat "$w/r.out" "$w/r.err"
    [ "$rc" != 0 ] || { detail="exit 0: ran without the GPU"; return 1; }
    grep -q 'APPLICATION TIMED OUT' "$w/r.err" && return 1
    grep -q '^dtlab: .*GPU' "$w/r.err" || { detail="exit $rc without dtlab's message on stderr"; return 1; }
    detail="exit $rc: $(grep -m1 '^dtlab: .*GPU' "$w/r.err" | cut -c1-90)"
}
check "--device cuda, GPU hidden: refused" 10 refuse_hidden
fallback_hidden() {
    cpu_ok=1
    CUDA_VISIBLE_DEVICES='' mpi 2 "$bin/lessons/01_hello" >"$w/f.out" 2>"$w/f.err" || return 1
    cat "$w/f.out" "$w/f.err"
    grep -q 'running on the CPU' "$w/f.out" && { detail="the CPU notice is on stdout"; return 1; }
    grep -q 'running on the CPU' "$w/f.err" || { detail="no CPU notice on stderr"; return 1; }
    detail="stderr: $(grep -m1 'running on the CPU' "$w/f.err" | cut -c1-90)"
}
check "default device, GPU hidden: CPU, on stderr" 10 fallback_hidden

# ==== 4. the suites ====
unit() { tl "$bin/tests/$1"; local rc=$?; detail=$(grep -E '^[0-9]+%: Checks' "$log" | tail -n 1); return $rc; }
needs_mpi=0
for f in "$bin"/tests/unit_*; do
    check "${f##*/}" 8 unit "${f##*/}"
done
needs_mpi=1
suite() {
    DT_DEVICE=$DEV mpi "$2" "$bin/tests/$1"
    local rc=$?
    detail=$(grep -E '^[0-9]+%: Checks' "$log" | tail -n 1)
    return $rc
}
for n in 1 2 3 4; do
    for f in "$bin"/tests/mpi_*; do
        check "${f##*/} -n $n" 8 suite "${f##*/}" "$n"
    done
done

# ==== 5. train: the GPU against the CPU and against serial ====
small=(--steps 5 --batch 48 --hidden 64 --layers 4 --examples 512)

# compare A B ABS REL: the float32 files agree within ABS + REL*|a| everywhere; sets
# cmp_detail to the count and the largest difference
compare() {
    local out
    [ -s "$1" ] && [ -s "$2" ] || { cmp_detail="a dump is missing"; return 1; }
    out=$(paste <(od -An -v -f -w4 "$1") <(od -An -v -f -w4 "$2") |
          awk -v t="$3" -v r="$4" '{ d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1
                 if (d > m) m = d; if (!(d <= t + r * a) || NF != 2) bad++ }
                 END { printf "%d %d %g", NR, bad, m }')
    set -- $out
    cmp_detail="$1 weights, max diff $3"
    [ "$2" = 0 ] && [ "$1" -gt 0 ] || { cmp_detail="$2 of $1 weights differ (max $3)"; return 1; }
}

# on_gpu OUT: train's device books (lessons/train.c, print_device_books) say that its
# steps stayed on the GPU: every rank launched work there, none moved tensor data
# through the host or allocated device memory. A `device:` line naming the GPU is not
# enough: a mode can compute on the host while printing it. Sets detail when not.
# With OFFLOAD=1 tensor data may cross (fsdp --offload keeps its shards in host memory:
# moving them is the point), but not allocations, and every rank must launch.
on_gpu() {
    [ "$dry" = 1 ] && return 0               # a dry run trains on the CPU: no books
    local verdict
    verdict=$(grep -A12 '^on the GPU in steps' "$1" | grep -m1 -E '^  (every step|the steps|some rank)')
    case $verdict in
        "  every step stayed on the GPU"*) return 0 ;;
        "  the steps left the GPU: tensor data went through the host")
            [ "${OFFLOAD:-0}" = 1 ] && return 0
            detail="device books: ${verdict#  }" ;;
        "") detail="no device books in train's output (not on the GPU?)" ;;
        *) detail="device books: ${verdict#  }" ;;
    esac
    return 1
}

# train_pair N TAG KIND ARGS...: the same run on the GPU and on the CPU. KIND: f32 (the
# weights agree to 1e-4 + 1e-3|w|; GPU kernels and cuBLAS round differently) and also
# with serial training on the GPU; f32x (the same, no serial: another model or
# optimizer); f16 (1e-3 + 1e-2|w|); run (lossy or timing-dependent: both run, the final
# losses are shown)
train_pair() {
    local n=$1 tag=$2 kind=$3 g c books=""
    shift 3
    g=$w/$tag.$DEV.f32 c=$w/$tag.cpu.f32
    mpi "$n" "$bin/train" "${small[@]}" "$@" --device "$DEV" --dump "$g" >"$w/$tag.out" 2>&1
    local rc=$?
    cat "$w/$tag.out"
    [ "$rc" = 0 ] || return 1
    grep '^step 5 loss' "$w/$tag.out" | tail -n 1 >"$w/$tag.loss"
    on_gpu "$w/$tag.out" || books=$detail
    mpi "$n" "$bin/train" "${small[@]}" "$@" --device cpu --dump "$c" || return 1
    local lg lc ok=0
    lg=$(awk '{ print $4 }' "$w/$tag.loss")
    lc=$(grep '^step 5 loss' "$log" | tail -n 1 | awk '{ print $4 }')
    case $kind in
        run) detail="final loss $DEV $lg, cpu $lc" ;;
        f16) compare "$g" "$c" 1e-3 1e-2 || ok=1
             detail="vs cpu: $cmp_detail" ;;
        *) compare "$g" "$c" 1e-4 1e-3 || ok=1
           detail="vs cpu: $cmp_detail" ;;
    esac
    if [ "$ok" = 0 ] && [ "$kind" = f32 ] && [ "$tag" != serial ] &&
       [ ! -s "$w/serial.$DEV.f32" ]; then
        detail="$detail; serial not run (--only)"
    elif [ "$ok" = 0 ] && [ "$kind" = f32 ] && [ "$tag" != serial ]; then
        if compare "$g" "$w/serial.$DEV.f32" 1e-4 1e-3; then
            detail="$detail; vs serial: ${cmp_detail#* weights, }"
        else
            detail="$detail; vs serial on $DEV: $cmp_detail" ok=1
        fi
    fi
    [ -z "$books" ] || detail="$books; $detail" ok=1
    return $ok
}
T=10
check "train serial: $DEV = cpu" $T train_pair 1 serial f32 --mode serial
check "train dp -n 3: $DEV = cpu = serial" $T train_pair 3 dp f32 --mode dp
check "train dp --dedicated-server -n 3" $T train_pair 3 dpded f32 --mode dp --dedicated-server
check "train dp --async 1 -n 3 (runs)" $T train_pair 3 dpasync run --mode dp --async 1
check "train ddp -n 4: $DEV = cpu = serial" $T train_pair 4 ddp f32 --mode ddp
check "train ddp --accum 2 --no-overlap -n 2" $T train_pair 2 ddpacc f32 --mode ddp \
    --accum 2 --no-overlap --bucket-kb 1
check "train fsdp --zero 1 --optim adam -n 4" $T train_pair 4 fsdp1 f32x --mode fsdp \
    --zero 1 --optim adam --lr 0.01
check "train fsdp --zero 2 -n 4" $T train_pair 4 fsdp2 f32 --mode fsdp --zero 2
check "train fsdp --zero 3 -n 4" $T train_pair 4 fsdp3 f32 --mode fsdp --zero 3
OFFLOAD=1 check "train fsdp --zero 3 --offload -n 4" $T train_pair 4 fsdp3off f32 --mode fsdp \
    --zero 3 --offload
check "train fsdp --zero 3 --prefetch -n 4" $T train_pair 4 fsdp3pf f32 --mode fsdp --zero 3 \
    --prefetch
check "train tp -n 4 (megatron)" $T train_pair 4 tp f32 --mode tp
check "train tp --tp-style allgather -n 2" $T train_pair 2 tpag f32 --mode tp \
    --tp-style allgather
check "train pp -n 4 (1f1b)" $T train_pair 4 pp f32 --mode pp
check "train pp --schedule gpipe --micro 2 -n 3" $T train_pair 3 ppg f32 --mode pp \
    --schedule gpipe --micro 2
check "train hybrid --dp 2 --tp 2 -n 4" $T train_pair 4 hyb1 f32 --mode hybrid --dp 2 --tp 2 \
    --pp 1
check "train hybrid --tp 2 --pp 2 -n 4" $T train_pair 4 hyb2 f32 --mode hybrid --tp 2 --pp 2
check "train moe -n 4" $T train_pair 4 moe f32x --mode moe
# moe on 4 ranks against 1 on the same device, bit for bit: its routing depends on the
# groups only, never on the ranks (lib/parallel/moe.c), on the GPU as on the CPU
moe_ranks() {
    local a=$w/moe4.$DEV.f32 b=$w/moe1.$DEV.f32
    mpi 4 "$bin/train" "${small[@]}" --mode moe --experts 8 --moe-groups 4 --device "$DEV" \
        --dump "$a" >"$w/moe4.out" 2>&1 || { cat "$w/moe4.out"; return 1; }
    cat "$w/moe4.out"
    on_gpu "$w/moe4.out" || return 1
    mpi 1 "$bin/train" "${small[@]}" --mode moe --experts 8 --moe-groups 4 --device "$DEV" \
        --dump "$b" || return 1
    cmp -s "$a" "$b" || { compare "$a" "$b" 0 0; detail="4 ranks against 1: $cmp_detail"; return 1; }
    detail="4 ranks against 1: byte-equal ($(($(wc -c <"$a") / 4)) weights)"
}
check "train moe --experts 8: -n 4 = -n 1 on $DEV" $T moe_ranks
check "train dp-threads --threads 3 -n 1" $T train_pair 1 dpt f32 --mode dp-threads \
    --threads 3
check "train ddp --compress fp16 -n 4" $T train_pair 4 cfp16 f16 --mode ddp --compress fp16
check "train ddp --compress int8 -n 4" $T train_pair 4 cint8 f16 --mode ddp --compress int8
check "train ddp --compress sign -n 4 (runs)" $T train_pair 4 csign run --mode ddp \
    --compress sign

# fp16 on the GPU against fp16 on the CPU
check "train ddp --precision fp16 -n 4" $T train_pair 4 h_ddp f16 --mode ddp --precision fp16
check "train dp --precision fp16 -n 3" $T train_pair 3 h_dp f16 --mode dp --precision fp16
check "train fsdp --zero 3 --precision fp16 -n 4" $T train_pair 4 h_fsdp f16 --mode fsdp \
    --zero 3 --precision fp16
check "train tp --precision fp16 -n 4" $T train_pair 4 h_tp f16 --mode tp --precision fp16
check "train pp --precision fp16 -n 4" $T train_pair 4 h_pp f16 --mode pp --precision fp16
check "train hybrid --dp 2 --tp 2 --precision fp16 -n 4" $T train_pair 4 h_hyb f16 \
    --mode hybrid --dp 2 --tp 2 --pp 1 --precision fp16

# the GPT (--model gpt) on the GPU against the same run on the CPU: a small one, 5 steps
# (f32x: train_pair's serial run is the MLP's); sp's blocks too, at 3 ranks (uneven)
gpt_pair() {
    # train_pair reads small: the GPT's options in place of the MLP's, for this call only
    local small=(--model gpt --steps 5 --batch 12 --layers 2 --heads 6 --embed 24 --seq 16)
    train_pair "$@"
}
check "train --model gpt serial" $T gpt_pair 1 gserial f32x --mode serial
check "train --model gpt ddp -n 2" $T gpt_pair 2 gddp f32x --mode ddp
check "train --model gpt fsdp --zero 3 -n 2" $T gpt_pair 2 gfsdp3 f32x --mode fsdp --zero 3
check "train --model gpt tp -n 2" $T gpt_pair 2 gtp f32x --mode tp
check "train --model gpt pp -n 2 (1f1b)" $T gpt_pair 2 gpp f32x --mode pp
check "train --model gpt tp --sp -n 3" $T gpt_pair 3 gtpsp f32x --mode tp --sp
check "train --model gpt dp -n 2" $T gpt_pair 2 gdp f32x --mode dp
check "train --model gpt hybrid --dp 2 --tp 2 -n 4" $T gpt_pair 4 ghyb f32x --mode hybrid \
    --dp 2 --tp 2 --pp 1
check "train --model gpt ddp --precision fp16 -n 2" $T gpt_pair 2 h_gddp f16 --mode ddp \
    --precision fp16

# checkpoints on the GPU: 6 steps at once against 3, a checkpoint, and 3 more resumed
# (weights bit for bit, losses of steps 4-6 equal), as tests/checkpoint.sh does
ck=(--steps 6 --hidden 16 --layers 3 --examples 200 --batch 24 --device "$DEV")
ck_same() {
    local n=$1 tag=$2 c=$w/ck.$2
    shift 2
    mpi "$n" "$bin/train" "${ck[@]}" "$@" --dump "$c.full" >"$c.full.log" 2>&1 ||
        { cat "$c.full.log"; return 1; }
    cat "$c.full.log"
    mpi "$n" "$bin/train" "${ck[@]}" "$@" --steps 3 --checkpoint "$c" --every 2 || return 1
    mpi "$n" "$bin/train" "${ck[@]}" "$@" --checkpoint "$c" --every 2 --resume "$c" \
        --dump "$c.res" >"$c.res.log" 2>&1 || { cat "$c.res.log"; return 1; }
    cat "$c.res.log"
    local want got
    want=$(awk '/^step [0-9]+ loss / && $2 > 3 { print $1, $2, $3, $4 }' "$c.full.log")
    got=$(awk '/^step [0-9]+ loss / { print $1, $2, $3, $4 }' "$c.res.log")
    cmp -s "$c.full" "$c.res" || { compare "$c.full" "$c.res" 0 0
        detail="resumed weights differ from the whole run's: $cmp_detail"; return 1; }
    [ "$got" = "$want" ] && [ -n "$got" ] || { detail="losses of steps 4-6 differ"; return 1; }
    grep -q 'resumed at step 3,' "$c.res.log" || { detail="no 'resumed at step 3'"; return 1; }
    detail="weights byte-equal, losses of steps 4-6 equal"
}
check "checkpoint on $DEV: ddp -n 2" 15 ck_same 2 ddp --mode ddp
check "checkpoint on $DEV: fsdp --zero 3 -n 3" 15 ck_same 3 fsdp --mode fsdp --zero 3
check "checkpoint on $DEV: dp fp16 -n 2" 15 ck_same 2 dpfp16 --mode dp --precision fp16 \
    --scale-window 2
check "checkpoint on $DEV: pp -n 2" 15 ck_same 2 pp --mode pp
# resharded on the GPU: stopped on 3 ranks, resumed on 2 (regions staged through the
# host into device memory), against the run never stopped, to rounding
ck_reshard() {
    local c=$w/ck.$1
    shift
    mpi 3 "$bin/train" "${ck[@]}" "$@" --dump "$c.full" || return 1
    mpi 3 "$bin/train" "${ck[@]}" "$@" --steps 3 --checkpoint "$c" --every 3 || return 1
    mpi 2 "$bin/train" "${ck[@]}" "$@" --resume "$c" --dump "$c.res" || return 1
    grep -q 'resharded from 3 ranks to 2' "$log" || { detail="no 'resharded' line"; return 1; }
    compare "$c.full" "$c.res" 1e-5 1e-4 || { detail="$cmp_detail"; return 1; }
    detail="3 -> 2 ranks: $cmp_detail"
}
check "checkpoint on $DEV resharded: fsdp --zero 3" 15 ck_reshard rsf --mode fsdp --zero 3 \
    --optim adam --lr 0.01
check "checkpoint on $DEV resharded: tp" 15 ck_reshard rst --mode tp --hidden 18
# a checkpoint written on one device is not resumed on the other (docs/troubleshooting.md:
# their rounding differs): exit 2 and a sentence
ck_cross() {
    local other=cpu c=$w/ck.ddp
    cpu_ok=1
    [ "$dry" = 1 ] && { detail="dry run: checkpoints are written on the CPU"; return 0; }
    [ -d "$c" ] || { detail="no checkpoint from 'checkpoint on $DEV: ddp'"; return 1; }
    mpi 2 "$bin/train" "${ck[@]}" --mode ddp --device "$other" --steps 8 --resume "$c"
    local rc=$?
    [ "$rc" = 2 ] || { detail="exit $rc, want 2"; return 1; }
    detail="exit 2: $(grep -m1 -i 'device' "$log" | cut -c1-80)"
}
check "checkpoint from $DEV resumed on cpu: refused" 8 ck_cross

# ==== 6. traces: staging copies beside the messages; train's steps on the GPU ====
# trace_counts FILE: "send recv d2h h2d compute bytes-sent bytes-d2h", the d2h and h2d
# being the staging copies only: dt_memcpy's (coll "memcpy", lib/trace.h) are not p2p's
trace_counts() {
    awk '!/^#/ && !($6 == "memcpy" && ($4 == "d2h" || $4 == "h2d")) {
             k[$4]++; if ($4 == "send") s += $12; if ($4 == "d2h") d += $12 }
         END { printf "%d %d %d %d %d %d %d", k["send"], k["recv"], k["d2h"], k["h2d"],
               k["compute"], s, d }' "$1"
}
# steps_stay SUMMARY: dttrace's summary of a training trace says that no tensor data
# crossed between host and GPU in the steps the device books count (all but the
# first): its line "  in steps 2..5: tensor 0 (0 B), batch ..., number ...". On the CPU
# nothing crosses and dttrace prints no such lines; on the GPU it must (the data set is
# read on the host: the batch goes up at least once), or dt_memcpy went unrecorded.
# Adds to detail.
steps_stay() {
    local all in k
    all=$(grep -m1 '^host<->GPU copies: ' "$1")
    in=$(grep -m1 -E '^  in steps? [0-9.]+: ' "$1")
    if [ "$dry" = 1 ]; then                         # the CPU: nothing can cross
        [ -z "$all" ] || { detail="${detail:+$detail; }on the CPU: $all"; return 1; }
        detail="${detail:+$detail; }no host<->GPU copies"
        return 0
    fi
    [ -n "$all" ] || { detail="${detail:+$detail; }no host<->GPU copies in the trace"
                       return 1; }
    [ -n "$in" ] || { detail="${detail:+$detail; }no training steps in the trace"
                      return 1; }
    k=$(sed -n 's/^  in steps\{0,1\} [0-9.]*: tensor \([0-9]*\) .*/\1/p' <<<"$in")
    [ "$k" = 0 ] || { detail="${detail:+$detail; }tensor data through the host ${in#  }"
                      return 1; }
    detail="${detail:+$detail; }${in#  }"
}
trace_check() {
    local t=$w/$1.trace
    shift
    mpi "$@" --device "$DEV" --trace "$t" || return 1
    cp "$t" "$logs/" 2>/dev/null
    head -n 1 "$t" | grep -q '^# dtlab-trace ' || { detail="no trace header"; return 1; }
    tl "$bin/dttrace" "$t" >"$w/dttrace.out" || return 1
    head -n 20 "$w/dttrace.out"
    # shellcheck disable=SC2046  # seven numbers
    set -- $(trace_counts "$t")
    detail="send $1, recv $2, d2h $3, h2d $4, compute $5; bytes sent $6, d2h $7"
    [ "$1" -gt 0 ] && [ "$2" -gt 0 ] || return 1
    if [ "$dry" = 1 ]; then
        [ "$3" = 0 ] && [ "$4" = 0 ] || return 1    # host buffers: nothing to stage
    else
        [ "$3" -gt 0 ] && [ "$4" -gt 0 ] || return 1
    fi
    ! grep -q '^# train ' "$t" || steps_stay "$w/dttrace.out"     # a training run's
}
# trace_steps TAG N ARGS...: train ARGS at N ranks, traced; its steps on the GPU
trace_steps() {
    local t=$w/$1.trace n=$2
    shift 2
    mpi "$n" "$bin/train" "${small[@]}" "$@" --device "$DEV" --trace "$t" || return 1
    cp "$t" "$logs/" 2>/dev/null
    tl "$bin/dttrace" "$t" >"$w/dttrace.out" || return 1
    cat "$w/dttrace.out"
    steps_stay "$w/dttrace.out"
}
check "trace 08_ring_allreduce -n 4: d2h, h2d" 10 trace_check ring 4 \
    "$bin/lessons/08_ring_allreduce" --count 100000 --iters 2
check "trace train ddp -n 2: d2h, h2d, compute; no tensor copies in steps" 10 \
    trace_check train 2 "$bin/train" --mode ddp "${small[@]}"
check "trace train serial: no tensor copies in steps" 5 trace_steps serial-steps 1 \
    --mode serial

# ==== 7. lessons, stress, collbench ====
# a lesson, and its device line (lib/prog.c, dt_print_devices): every rank on the GPU
lesson() {
    local name=$1 n=$2
    shift 2
    mpi "$n" "$bin/lessons/$name" --device "$DEV" "$@" || return 1
    detail=$(grep -m1 '^device: ' "$log" | cut -c1-60)
    [ -n "$detail" ] || { detail="no 'device:' line"; return 1; }
    # a lesson whose work stays on the host says so on a line of its own (lessons 26-28)
    if [ "$dry" = 0 ] && grep -q '^on the CPU: ' "$log"; then
        detail="ran on the host: $(grep -m1 '^on the CPU: ' "$log" | cut -c13-90)"
        return 1
    fi
    ! grep -q "^device: $([ "$dry" = 1 ] && echo cuda || echo cpu)" "$log"
}
for f in "$bin"/lessons/*; do
    name=${f##*/}
    case $name in
        02_p2p) check "lessons/$name -n 4" 8 lesson "$name" 4 --iters 2000 ;;
        09_allreduce_compare) check "lessons/$name -n 4" 10 lesson "$name" 4 --iters 3 ;;
        22_hosts) check "lessons/$name -n 2" 10 lesson "$name" 2 --max-size 64K --iters 2 ;;
        *) check "lessons/$name -n 4" 8 lesson "$name" 4 ;;
    esac
done

stress() {
    mpi "$1" "$bin/tests/stress" --seconds "$2" --device "$DEV" || return 1
    detail=$(grep -m1 '^stress: [0-9]* collectives in' "$log" | sed 's/^stress: //')
    [[ "$detail" == *", 0 mismatches" ]] && [[ "$detail" != "0 "* ]]
}
check "stress -n 2 --device $DEV" 16 stress 2 8
check "stress -n 4 --device $DEV" 16 stress 4 8

collbench() { mpi "$@"; }
check "collbench -n 2 -C all --device $DEV" 20 collbench 2 "$bin/bench/collbench" -C all \
    -e 4M -n 5 -w 1 --device "$DEV"
big=64M
[ "$dry" = 1 ] && big=4M        # 64M at 4 ranks takes a minute on 2 cores
check "collbench -n 4 -b 1M -e $big --device $DEV" 20 collbench 4 \
    "$bin/bench/collbench" -b 1M -e "$big" -f 4 -n 10 -w 2 --device "$DEV"
check "stress -n 8 --device $DEV" 20 stress 8 8

# ==== 8. the transports (DT_P2P), and the benchmarks of the transports ====
# Every multi-rank suite and stress with each transport on device buffers, a check of
# messages larger than a segment, and the benchmarks (bench-*), whose files land in
# $bw (and the logs); the ratios come last (bench_report, called by finish). Sizes and
# iterations: full on a GPU, a small version of every command line in a dry run.
bw=$w/bench
mkdir -p "$bw" "$logs/bench"
if [ "$dry" = 1 ]; then
    B_MAX=4M B_IT=(-n 2 -w 1) G_IT=(-i 2 -w 1) K_ARGS=(--size 32M --iters 5 --warmup 1)
    L_MAX=32M
    S_SECS=3
    DDP_BASE=(--hidden 64 --layers 4 --features 32 --examples 2048 --steps 8 --quiet)
    DDP_BATCH=256 DDP_BUCKET=8
    T_SHAPES="64:32" T_STEPS=6 T_SECS=0.2
else
    B_MAX=256M B_IT=(-n 10 -w 3) G_IT=(-i 10 -w 3 --cell-seconds 2)
    K_ARGS=(--size 256M --iters 20 --warmup 3)
    L_MAX=64M
    S_SECS=6
    # about 17.3 M parameters (69 MB of fp32 gradients, 9 buckets of 8 MiB), a global
    # batch of 4096 rows: compute and the allreduces of one step take milliseconds each
    DDP_BASE=(--hidden 2048 --layers 6 --features 256 --examples 16384 --steps 20 --quiet)
    DDP_BATCH=4096 DDP_BUCKET=8192
    # hidden:batch, a small step (launches and waits weigh) and a large one (products)
    T_SHAPES="1024:256 4096:2048" T_STEPS=60 T_SECS=2
fi

# with_p2p MODE CMD...: CMD with DT_P2P=MODE, or as it is where MODE is empty
with_p2p() {
    local m=$1
    shift
    if [ -n "$m" ]; then DT_P2P=$m "$@"; else "$@"; fi
}

suite_p2p() {
    DT_P2P=$1 suite "$2" "$3"
}
stress_p2p() {
    DT_P2P=$1 stress "$2" "$3"
    local rc=$?
    detail="DT_P2P=$1: $detail"
    return $rc
}

# messages larger than a segment (dt_p2p_segment: 16 MiB on the device) with MODE:
# collbench's check against MPI at 32 and 64 MiB (stress stays under 1 MiB); with
# staging, every 16 MiB segment goes in staged pieces (DT_STAGE_KIB, 1 MiB)
large() {
    DT_P2P=$1 mpi 4 "$bin/bench/collbench" -C allreduce,allgather,reduce_scatter \
        -b 32M -e "$L_MAX" -f 2 -n 1 -w 0 -c 1 --mpi 0 --device "$DEV" || return 1
    detail="$(grep -m1 '^# p2p:' "$log" | sed 's/^# p2p: //'); $(grep -m1 '^# Wrong' "$log" |
              sed 's/^# //; s/  */ /g')"
}

# bench-stage-N: DT_P2P=staging, the pipeline (pieces of 1 MiB: a piece's copy to or
# from the GPU overlaps MPI's moving another) against each message staged whole
# (DT_STAGE_KIB=0: d2h, MPI, h2d one after the other), in one run
bench_stage() {
    local n=$1 kib out rc=0
    for kib in 1024 0; do
        out=$bw/stage-$n-$kib
        DT_P2P=staging DT_STAGE_KIB=$kib mpi "$n" "$bin/bench/collbench" \
            -C allreduce,allgather -b 4M -e "$B_MAX" -f 4 "${B_IT[@]}" -c 0 --mpi 0 \
            --csv "$out.csv" --device "$DEV" >"$out.out" 2>&1 || rc=1
        cat "$out.out"
        cp "$out.csv" "$logs/bench/" 2>/dev/null
    done
    detail=$(awk -F, 'FNR > 1 && $1 == "allreduce" { b = $10 > $14 ? $10 : $14
                 v[FILENAME ~ /-0\.csv$/ ? "whole" : "pieces"] = b; s = $3 }
             END { printf "allreduce %d MiB busbw GB/s: pieces %.2f, whole %.2f", s / 1048576,
                   v["pieces"], v["whole"] }' "$bw/stage-$n-1024.csv" "$bw/stage-$n-0.csv" \
             2>/dev/null)
    return $rc
}

# bench-kernel: bench/gpubw, the reduction kernel against a device-to-device copy
bench_kernel() {
    tl "$bin/bench/gpubw" --device "$DEV" "${K_ARGS[@]}" || return 1
    grep '^gpubw: result ' "$log" | tail -n 1 >"$bw/kernel.txt"
    [ -s "$bw/kernel.txt" ] || { detail="no 'gpubw: result' line"; return 1; }
    detail="reduce $(kv reduce_GBps "$bw/kernel.txt") GB/s, copy+sync $(kv copysync_GBps \
"$bw/kernel.txt"), copy $(kv copy_GBps "$bw/kernel.txt"): ratio $(kv ratio "$bw/kernel.txt") (aim 0.9)"
}

# bench-coll-N: collbench, dtlab's rows alone (--mpi 0) and unchecked (-c 0: the
# suites, stress and large_ipc check; a check would cost CPU time for 4 fills of each
# buffer per size), for DT_P2P=ipc and staging on device buffers and for host buffers
# (the default transport); a CSV and the transport line ("# p2p: ...") for each
bench_coll() {
    local n=$1 cfg dev mode rc=0 out mps=""
    for cfg in ipc staging host ipc-mps; do
        out=$bw/coll-$n-$cfg
        if [ "$cfg" = host ]; then dev=cpu mode=${DT_P2P:-}; else dev=$DEV mode=${cfg%-mps}; fi
        if [ "$cfg" = ipc-mps ]; then
            mps_up || continue
            mps=1
        fi
        echo "== $cfg: DT_P2P=${mode:-(unset)} --device $dev"
        (   # the MPS rows' programs find its daemon through these (a subshell: only them)
            if [ -n "$mps" ]; then
                export CUDA_MPS_PIPE_DIRECTORY="$w/mps" CUDA_MPS_LOG_DIRECTORY="$w/mpslog"
            fi
            with_p2p "$mode" mpi "$n" "$bin/bench/collbench" \
                -C allreduce,allgather,reduce_scatter -b 1M -e "$B_MAX" -f 4 "${B_IT[@]}" \
                -c 0 --mpi 0 --csv "$out.csv" --device "$dev" >"$out.out" 2>&1
        ) || rc=1
        cat "$out.out"
        grep -m1 '^# p2p:' "$out.out" | sed "s/^# p2p: /DT_P2P=${mode:-(unset)}: /" >"$out.p2p"
        cp "$out.csv" "$logs/bench/" 2>/dev/null
    done
    detail=$(awk -F, -v n="$n" 'FNR > 1 && $1 == "allreduce" { b = $10 > $14 ? $10 : $14
                 split(FILENAME, p, "-"); v[p[length(p)]] = sprintf("%.1f", b); s = $3 }
             END { printf "allreduce %d MiB busbw GB/s: ipc %s, staging %s, host %s", s / 1048576,
                   v["ipc.csv"], v["staging.csv"], v["host.csv"] }' \
             "$bw/coll-$n-ipc.csv" "$bw/coll-$n-staging.csv" "$bw/coll-$n-host.csv" 2>/dev/null)
    return $rc
}

# MPS (NVIDIA's multi-process service), where the machine has it: the ranks' kernels
# and copies then share the GPU at once instead of taking turns (time-slicing). Started
# once, for the ipc-mps rows only (a private pipe folder: nothing else uses it), and
# stopped by mps_down at the end. Not in a dry run.
mps_state=""
mps_up() {
    [ "$dry" = 0 ] || return 1
    case $mps_state in up) return 0 ;; none|down) return 1 ;; esac
    mps_state=none
    command -v nvidia-cuda-mps-control >/dev/null || return 1
    mkdir -p "$w/mps" "$w/mpslog"
    CUDA_MPS_PIPE_DIRECTORY="$w/mps" CUDA_MPS_LOG_DIRECTORY="$w/mpslog" \
        timeout 20 nvidia-cuda-mps-control -d >/dev/null 2>&1 || return 1
    mps_state=up
}
mps_down() {
    [ "$mps_state" = up ] || return 0
    echo quit | CUDA_MPS_PIPE_DIRECTORY="$w/mps" timeout 20 nvidia-cuda-mps-control \
        >/dev/null 2>&1
    mps_state=down
}

# bench-gloo-N: bench/gloo_bench.py with the machine's python3 and torch (the pack's
# libraries kept out of its way)
bench_gloo() {
    local n=$1 py=${DT_PYTHON:-python3}
    cpu_ok=1                                # its own "skipped: no GPU here" is the FAIL
    tl env LD_LIBRARY_PATH="$orig_ld" "$py" "$bin/bench/gloo_bench.py" -n "$n" \
        -C allreduce,allgather,reduce_scatter -b 1M -e "$B_MAX" -f 4 "${G_IT[@]}" \
        --device "$DEV" --csv "$bw/gloo-$n.csv"
    local rc=$?
    if grep -q '^gloo_bench: skipped: ' "$log"; then
        skipped=$(grep -m1 '^gloo_bench: skipped: ' "$log" | sed 's/^gloo_bench: //')
        [ "$dry" = 1 ] || ! grep -q 'no GPU here' "$log" || { detail=$skipped; return 1; }
        return "$rc"
    fi
    cp "$bw/gloo-$n.csv" "$logs/bench/" 2>/dev/null
    detail=$(grep -m1 '^# Avg bus bandwidth' "$log" | sed 's/^# //')
    return $rc
}

# bench-ddp: train --mode ddp, overlap on and off, at 2 and 4 ranks on the GPU; the
# compute alone: the same ranks' share of the batch trained by as many serial runs at
# once (each rank's work, sharing the GPU as DDP's ranks do, with nothing to send).
# Hidden share = (off - on) / (off - compute): of the time communication adds when it
# is not overlapped, the part overlap hides.
step_ms() { sed -n 's/^time per step: \([0-9.]*\) ms.*/\1/p' "$1" | tail -n 1; }
# compute_alone N PREFIX: N serial runs at once, each on 1/N of DDP_BATCH (a rank's
# share, sharing the GPU as the ranks do, with nothing to send), outputs PREFIX-compI.out;
# prints the slowest one's step in ms, or nothing when one failed
compute_alone() {
    local n=$1 f=$2 i t comp=""
    for i in $(seq "$n"); do
        mpi 1 "$bin/train" --mode serial "${DDP_BASE[@]}" --batch $((DDP_BATCH / n)) \
            --device "$DEV" >"$f-comp$i.out" 2>&1 &
    done
    wait || true
    for i in $(seq "$n"); do
        t=$(step_ms "$f-comp$i.out")
        [ -n "$t" ] || return 1
        comp=$(awk -v a="$comp" -v b="$t" 'BEGIN { print (a == "" || b > a) ? b : a }')
    done
    echo "$comp"
}
# mps_env on|off: the MPS daemon's folders in the environment of what runs next (bench-ddp
# and bench-fsdp with the argument mps), or out of it again
mps_env() {
    if [ "$1" = on ]; then
        export CUDA_MPS_PIPE_DIRECTORY="$w/mps" CUDA_MPS_LOG_DIRECTORY="$w/mpslog"
    else
        unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    fi
}
# bench_ddp [mps]: with mps, the same under NVIDIA's MPS (the ranks' kernels and copies
# at once on the GPU, not taking turns): what overlap can hide when they share it
bench_ddp() {
    local n on off comp rc=0 f sfx=""
    if [ "${1:-}" = mps ]; then
        mps_up || { skipped="no MPS here (nvidia-cuda-mps-control; never in a dry run)"; return 0; }
        sfx=-mps
        mps_env on
    fi
    for n in 2 4; do
        f=$bw/ddp-$n$sfx
        mpi "$n" "$bin/train" --mode ddp "${DDP_BASE[@]}" --batch "$DDP_BATCH" \
            --bucket-kb "$DDP_BUCKET" --device "$DEV" >"$f-on.out" 2>&1 || rc=1
        mpi "$n" "$bin/train" --mode ddp "${DDP_BASE[@]}" --batch "$DDP_BATCH" \
            --bucket-kb "$DDP_BUCKET" --no-overlap --device "$DEV" >"$f-off.out" 2>&1 || rc=1
        comp=$(compute_alone "$n" "$f")
        cat "$f"-*.out
        on=$(step_ms "$f-on.out") off=$(step_ms "$f-off.out")
        [ -n "$on" ] && [ -n "$off" ] && [ -n "$comp" ] || { rc=1; continue; }
        echo "$n $on $off $comp" >"$f.txt"
        detail="${detail:+$detail; }n=$n on $on off $off compute $comp ms"
    done
    [ -z "$sfx" ] || mps_env off
    return $rc
}

# bench-torch: one training step of the MLP on the GPU, dtlab's `train --mode serial`
# against PyTorch eager (bench/torch_step.py, the machine's torch) on the same GPU, the
# same shapes, batch and optimizer (SGD, momentum 0.9), the batch uploaded and the loss
# read back every step on both sides: fp32 (TF32 off on both) and mixed precision
# (dtlab's --precision fp16 against torch's autocast with a GradScaler). Both quote the
# mean step after warm-up. Rows into $bw/torch.txt: shape batch precision dtlab torch.
bench_torch() {
    local py=${DT_PYTHON:-python3} h b p dt tt rc=0 f
    cpu_ok=1
    for h in $T_SHAPES; do
        b=${h#*:} h=${h%:*}
        for p in fp32 fp16; do
            f=$bw/torch-$h-$b-$p
            mpi 1 "$bin/train" --mode serial --features 784 --hidden "$h" --layers 4 \
                --classes 10 --batch "$b" --examples $((8 * b)) --steps "$T_STEPS" --quiet \
                --lr 0.01 --precision "$p" --device "$DEV" >"$f.dt" 2>&1 || rc=1
            tl env LD_LIBRARY_PATH="$orig_ld" "$py" "$bin/bench/torch_step.py" --in 784 \
                --hidden "$h" --layers 4 --out 10 --batch "$b" --seconds "$T_SECS" \
                --device "$DEV" $([ "$p" = fp16 ] && echo --amp) >"$f.pt" 2>&1 || rc=1
            cat "$f.dt" "$f.pt"
            if grep -q '^torch_step: skipped' "$f.pt" || grep -q 'No module named' "$f.pt"; then
                skipped=$(grep -m1 -E 'skipped|No module' "$f.pt")
                [ "$dry" = 1 ] && return 0
                detail=$skipped; return 1
            fi
            dt=$(step_ms "$f.dt") tt=$(sed -n 's/.*, mean \([0-9.]*\)).*/\1/p' "$f.pt")
            [ -n "$dt" ] && [ -n "$tt" ] || { rc=1; continue; }
            echo "784-${h}x3-10 $b $p $dt $tt" >>"$bw/torch.txt"
            detail="${detail:+$detail; }h$h $p $(awk -v a="$dt" -v b="$tt" 'BEGIN { printf "%.2f", a / b }')x"
        done
    done
    return $rc
}

# bench-fsdp: train --mode fsdp --zero 3 at 4 ranks on the GPU with and without
# --prefetch (the next layer's allgather on a thread of its own, overlapping this
# layer's compute), beside the compute alone (4 serial runs at once, as bench-ddp)
bench_fsdp() {
    local n=4 on off comp f=$bw/fsdp-4 rc=0
    if [ "${1:-}" = mps ]; then
        mps_up || { skipped="no MPS here (nvidia-cuda-mps-control; never in a dry run)"; return 0; }
        f=$f-mps
        mps_env on
    fi
    mpi "$n" "$bin/train" --mode fsdp --zero 3 --prefetch "${DDP_BASE[@]}" \
        --batch "$DDP_BATCH" --device "$DEV" >"$f-on.out" 2>&1 || rc=1
    [ "$rc" = 0 ] && { mpi "$n" "$bin/train" --mode fsdp --zero 3 "${DDP_BASE[@]}" \
        --batch "$DDP_BATCH" --device "$DEV" >"$f-off.out" 2>&1 || rc=1; }
    [ "$rc" = 0 ] && comp=$(compute_alone "$n" "$f")
    [[ "$f" != *-mps ]] || mps_env off
    [ "$rc" = 0 ] || return 1
    cat "$f"-*.out
    on=$(step_ms "$f-on.out") off=$(step_ms "$f-off.out")
    [ -n "$on" ] && [ -n "$off" ] && [ -n "$comp" ] || return 1
    echo "$n $on $off $comp" >"$f.txt"
    detail="n=4 prefetch $on, without $off, compute $comp ms"
}

# ==== 8, the order: the measurements most wanted first; the 8-rank ones last, where
# the budget may skip them ====
needs_mpi=0
check "bench-kernel: gpubw reduce vs D2D copy" 10 bench_kernel
needs_mpi=1
p2p_suites() {
    local mode=$1 n s
    for n in 2 4; do
        for s in mpi_collectives mpi_p2p mpi_ddp; do
            check "$s -n $n DT_P2P=$mode" 8 suite_p2p "$mode" "$s" "$n"
        done
        check "stress -n $n DT_P2P=$mode --device $DEV" $((S_SECS + 8)) stress_p2p "$mode" \
            "$n" "$S_SECS"
    done
}
p2p_suites ipc
check "collbench -n 4 DT_P2P=ipc -c 1, 32M..$L_MAX" 15 large ipc
check "bench-coll-2: collbench ipc, staging, host" 25 bench_coll 2
check "bench-gloo-2: torch gloo, $DEV tensors" 25 bench_gloo 2
check "bench-coll-4: collbench ipc, staging, host" 30 bench_coll 4
check "bench-gloo-4: torch gloo, $DEV tensors" 30 bench_gloo 4
check "bench-ddp: train ddp overlap on/off, compute alone" 40 bench_ddp
check "bench-torch: train serial vs PyTorch eager" 40 bench_torch
check "bench-fsdp: fsdp --prefetch on/off, compute alone" 30 bench_fsdp
check "bench-ddp-mps: the same under MPS" 40 bench_ddp mps
check "bench-fsdp-mps: the same under MPS" 30 bench_fsdp mps
p2p_suites staging
check "collbench -n 4 DT_P2P=staging -c 1, 32M..$L_MAX" 15 large staging
check "bench-stage-2: staging in pieces vs whole" 20 bench_stage 2
check "bench-stage-4: staging in pieces vs whole" 25 bench_stage 4
check "bench-coll-8: collbench ipc, staging, host" 45 bench_coll 8
check "bench-gloo-8: torch gloo, $DEV tensors" 45 bench_gloo 8
mps_down

# A check the budget skipped is a check that did not run: the run fails, so that the
# default budget (sized to reach every check on an H200) cannot pass a partial check.
over=0
for r in "${rows[@]}"; do
    [[ "$r" == SKIP\|*\|over\ the\ budget* ]] && over=$((over + 1))
done
if [ "$over" -gt 0 ] && [ -z "$only" ]; then
    row FAIL "the budget reached every check" "$SECONDS" \
        "$over checks skipped for the budget ($budget s): give it more (--budget)"
fi
exit $((nfail > 0))
