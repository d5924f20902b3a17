#!/usr/bin/env python3
"""step_vs_torch: one training step of dtlab's MLP on the CPU beside PyTorch eager's.

For each shape, batch and thread count it runs, in turn and --rounds times,
build/bench/stepbench (OpenBLAS's sgemm), stepbench with DT_BLAS=0 (the plain loops, one
thread) and bench/torch_step.py (PyTorch, the same shapes, optimizer and threads), each
as a process of its own, and prints each one's median step time and the ratios
dtlab/torch, round by round (min, median, max): below 1, dtlab is faster. A ratio is
taken within a round, so a machine that slows down for a while slows both sides.

    python3 bench/step_vs_torch.py                  # the table (about 2 minutes)
    python3 bench/step_vs_torch.py --quick          # two rows
    python3 bench/step_vs_torch.py --python /path/to/venv/bin/python   # torch lives there

Without PyTorch it prints why and exits 0 (a skip, not a failure)."""
import argparse
import csv
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MEDIAN = re.compile(r"median ([0-9.]+) ms")


def run(cmd, env=None):
    """Runs cmd, returns its median ms (the number after 'median')."""
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    m = MEDIAN.search(p.stdout)
    if p.returncode != 0 or not m:
        sys.exit(f"step_vs_torch: {' '.join(cmd)} failed (status {p.returncode}):\n"
                 f"{p.stdout}{p.stderr}")
    return float(m.group(1))


def spread(xs):
    return min(xs), statistics.median(xs), max(xs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stepbench", default=os.path.join(os.path.dirname(HERE), "build",
                                                        "bench", "stepbench"))
    ap.add_argument("--python", default=sys.executable, help="a python3 that has torch")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=0.5, help="timed seconds a run")
    ap.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    ap.add_argument("--quick", action="store_true", help="784-1024x3-10, batch 256 only")
    ap.add_argument("--no-loops", action="store_true", help="leave DT_BLAS=0 out")
    ap.add_argument("--csv", help="also write the table to this file")
    a = ap.parse_args()
    if a.rounds < 1 or not a.seconds > 0:
        ap.error("--rounds must be at least 1 and --seconds more than 0")
    try:
        threads = [int(t) for t in a.threads.split(",")]
        assert threads and min(threads) >= 1
    except (ValueError, AssertionError):
        ap.error("--threads must be a list of thread counts such as 1,2")
    if not os.access(a.stepbench, os.X_OK):
        sys.exit(f"step_vs_torch: no {a.stepbench}: build it first (make)")
    try:
        probe = subprocess.run([a.python, "-c", "import torch; print(torch.__version__)"],
                               capture_output=True, text=True, timeout=120)
        why = probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else "no output"
        ok = probe.returncode == 0
    except (OSError, subprocess.TimeoutExpired) as e:
        why, ok = str(e), False
    if not ok:
        print(f"step_vs_torch: skipped: {a.python} cannot import torch ({why}); "
              "pip install torch, or --python a python3 that has it")
        return 0
    version = probe.stdout.strip()

    # (hidden, batch, optim, act): the range, 784 -> 256..1024 x3 -> 10, 64-256
    shapes = [(1024, 256, "sgd", "relu")] if a.quick else [
        (256, 64, "sgd", "relu"), (256, 256, "sgd", "relu"), (1024, 64, "sgd", "relu"),
        (1024, 256, "sgd", "relu"), (1024, 256, "adam", "relu"), (1024, 256, "sgd", "gelu")]
    cores = os.cpu_count()
    print(f"one training step, 784 -> hidden x3 -> 10, fp32, on {cores} cores: dtlab "
          f"(OpenBLAS sgemm; loops: DT_BLAS=0) beside PyTorch {version} eager")
    print(f"median ms a step; ratios within each of {a.rounds} rounds (min median max), "
          "below 1: dtlab faster")
    head = (f"{'model':<13} {'batch':>5} {'thr':>3} {'optim':<5} {'act':<4} {'dtlab':>8} "
            f"{'loops':>8} {'torch':>8}   {'dtlab/torch':<19} {'loops/torch':<8}")
    print(head)
    rows = []
    for hidden, batch, optim, act in shapes:
        for t in threads:
            if optim != "sgd" or act != "relu":
                if t != threads[0]:
                    continue                      # the variants at one thread count
            common = ["--hidden", str(hidden), "--batch", str(batch), "--threads", str(t),
                      "--optim", optim, "--act", act, "--seconds", str(a.seconds)]
            loops = not a.no_loops and t == 1
            d, lp, tc = [], [], []
            for _ in range(a.rounds):
                env = dict(os.environ, DT_BLAS="1")
                d.append(run([a.stepbench] + common, env))
                tc.append(run([a.python, os.path.join(HERE, "torch_step.py")] + common))
                if loops:
                    env = dict(os.environ, DT_BLAS="0")
                    lp.append(run([a.stepbench] + common, env))
            r = spread([x / y for x, y in zip(d, tc)])
            rl = spread([x / y for x, y in zip(lp, tc)]) if loops else None
            row = dict(model=f"784-{hidden}x3-10", batch=batch, threads=t, optim=optim,
                       act=act, dtlab_ms=statistics.median(d),
                       loops_ms=statistics.median(lp) if loops else "",
                       torch_ms=statistics.median(tc), ratio_min=r[0], ratio=r[1],
                       ratio_max=r[2], loops_ratio=rl[1] if rl else "")
            rows.append(row)
            lms = f"{row['loops_ms']:.2f}" if loops else "-"
            lr = f"{rl[1]:.2f}" if rl else "-"
            print(f"{row['model']:<13} {batch:>5} {t:>3} {optim:<5} {act:<4} "
                  f"{row['dtlab_ms']:>8.2f} {lms:>8} {row['torch_ms']:>8.2f}   "
                  f"{r[0]:.2f} {r[1]:.2f} {r[2]:.2f}       {lr:<8}", flush=True)
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
