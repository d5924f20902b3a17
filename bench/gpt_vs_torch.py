#!/usr/bin/env python3
"""gpt_vs_torch: dtlab's GPT (lib/nn/gpt.h) held to the same model in PyTorch.

1. The check. build/bench/gptstep --dump writes one step from the initial weights (seed
   1): the weights, the batch, the mean loss and the gradients; this script builds the
   same GPT in PyTorch (GPT-2's layout, as nanoGPT writes it), loads those weights, runs
   forward, cross-entropy (the mean) and backward on the same tokens, and compares the
   loss and every gradient tensor, by name, with dtlab's: with sgemm and with the plain
   loops (DT_BLAS=0), at the default shape and at an odd one (3 heads, T = 17, B = 3).
   Each tensor's figure is max |dtlab - torch| / max |torch|; beside it PyTorch's own
   fp32 against fp64, the size of fp32's rounding at that tensor. Beyond 1e-4 it fails
   (status 1): fp32's rounding in sums of a few thousand terms gives 1e-7 to 1e-5, a
   wrong index, a missing term or a transposed weight gives 1e-2 to 1.
2. The timing, as bench/step_vs_torch.py does the MLP's: gptstep and a PyTorch step of
   the same shape, batch, threads and optimizer (Adam, lr 3e-3, fp32), each a process of
   its own, in turn, --rounds times; the medians and the ratios dtlab/torch within each
   round (min, median, max) of the median step, the fastest step and the CPU time a
   step (which a machine shared with other work does not inflate): below 1, dtlab is
   faster.

    python3 bench/gpt_vs_torch.py                   # check, then the table (minutes)
    python3 bench/gpt_vs_torch.py --quick           # check, then one shape
    python3 bench/gpt_vs_torch.py --check-only
    python3 bench/gpt_vs_torch.py --python /path/to/venv/bin/python   # torch lives there

Without PyTorch it prints why and exits 0 (a skip, not a failure)."""
import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from step_vs_torch import spread  # noqa: E402  (the MLP's table's min, median, max)

SHAPES = [dict(layers=4, heads=4, embed=128, seq=64, batch=8),      # gptstep's default
          dict(layers=4, heads=4, embed=256, seq=128, batch=8)]
ODD = dict(layers=2, heads=3, embed=48, seq=17, batch=3)             # the check's second
TOL = 1e-4


def shape_args(s):
    return [f"--{k}={v}" for k, v in s.items()]


def counts(s):
    """--threads: "1,2" -> [1, 2]"""
    v = [int(t) for t in s.split(",") if t.strip().isdigit()]
    if not v or len(v) != len(s.split(",")) or min(v) < 1:
        raise argparse.ArgumentTypeError(f"want thread counts such as 1,2, not '{s}'")
    return v


def shape_name(s):
    return f"L{s['layers']} H{s['heads']} C{s['embed']} T{s['seq']} B{s['batch']}"


# ==== the model in PyTorch ====

def make_gpt(torch, cfg):
    """GPT-2's decoder as nanoGPT writes it, with dtlab's shape: c_attn one Linear(C, 3C)
    whose rows are q, then k, then v; LayerNorm eps 1e-5; GELU's tanh form; causal
    softmax(q k^T / sqrt(d)) v; the head x @ wte^T, tied to the embedding."""
    nn, F = torch.nn, torch.nn.functional
    C, H, V, S = cfg["embed"], cfg["heads"], cfg["vocab"], cfg["seq"]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.c_attn = nn.LayerNorm(C, eps=1e-5), nn.Linear(C, 3 * C)
            self.attn_proj = nn.Linear(C, C)
            self.ln_2, self.c_fc = nn.LayerNorm(C, eps=1e-5), nn.Linear(C, 4 * C)
            self.mlp_proj = nn.Linear(4 * C, C)

        def forward(self, x):                                    # x (B, T, C)
            B, T, _ = x.shape
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2)     # (B, H, T, d)
                       for t in self.c_attn(self.ln_1(x)).split(C, dim=2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.attn_proj(y.transpose(1, 2).reshape(B, T, C))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(S, C)
            self.h = nn.ModuleList(Block() for _ in range(cfg["layers"]))
            self.ln_f = nn.LayerNorm(C, eps=1e-5)

        def forward(self, tok):                                  # tok (B, T)
            x = self.wte(tok) + self.wpe(torch.arange(tok.shape[1]))
            for b in self.h:
                x = b(x)
            return self.ln_f(x) @ self.wte.weight.t()            # (B, T, V)

        def dtlab_order(self):
            """(name, parameter) in dtlab's flat layout (gpt.h): unit 0 wte, wpe; each
            block ln1_w, ln1_b, wqkv, bqkv, wo, bo, ln2_w, ln2_b, w1, b1, w2, b2; lnf."""
            out = [("wte", self.wte.weight), ("wpe", self.wpe.weight)]
            for l, b in enumerate(self.h):
                for name, p in (("ln1_w", b.ln_1.weight), ("ln1_b", b.ln_1.bias),
                                ("wqkv", b.c_attn.weight), ("bqkv", b.c_attn.bias),
                                ("wo", b.attn_proj.weight), ("bo", b.attn_proj.bias),
                                ("ln2_w", b.ln_2.weight), ("ln2_b", b.ln_2.bias),
                                ("w1", b.c_fc.weight), ("b1", b.c_fc.bias),
                                ("w2", b.mlp_proj.weight), ("b2", b.mlp_proj.bias)):
                    out.append((f"{l}.{name}", p))
            return out + [("lnf_w", self.ln_f.weight), ("lnf_b", self.ln_f.bias)]

        def init_gpt2(self):
            """GPT-2's initial weights, as dtlab draws them but normal: std 0.02, the
            projections into the residual stream 0.02 / sqrt(2L), biases 0"""
            with torch.no_grad():
                for name, p in self.dtlab_order():
                    std = 0.02 / math.sqrt(2 * cfg["layers"]) if name[-2:] in ("wo", "w2") \
                        else 0.02
                    if p.dim() == 2:
                        p.normal_(0.0, std)
                    elif not name.endswith("_w"):
                        p.zero_()

    return GPT()


# ==== the check ====

def read(torch, path, dtype):
    with open(path, "rb") as f:
        return torch.frombuffer(bytearray(f.read()), dtype=dtype)


def torch_step(torch, d, dtype):
    """PyTorch's loss and gradients (dtlab's order, as dtype) for the dump in folder d"""
    cfg = json.load(open(os.path.join(d, "config.json")))
    model = make_gpt(torch, cfg).to(dtype)
    flat = read(torch, os.path.join(d, "params.f32"), torch.float32)
    n = sum(p.numel() for _, p in model.dtlab_order())
    if flat.numel() != n:
        sys.exit(f"gpt_vs_torch: FAILED: params.f32 holds {flat.numel()} floats, the "
                 f"layout of gpt.h {n}")
    with torch.no_grad():
        o = 0
        for _, p in model.dtlab_order():
            p.copy_(flat[o:o + p.numel()].view(p.shape))
            o += p.numel()
    B, T, V = cfg["batch"], cfg["T"], cfg["vocab"]
    tok = read(torch, os.path.join(d, "tokens.i32"), torch.int32).long().view(B, T)
    tgt = read(torch, os.path.join(d, "targets.i32"), torch.int32).long().view(B, T)
    loss = torch.nn.functional.cross_entropy(model(tok).view(-1, V), tgt.view(-1))
    loss.backward()
    return loss.item(), [(name, p.grad.detach().reshape(-1).double())
                         for name, p in model.dtlab_order()]


def rel(a, b):
    """max |a - b| / max |b|"""
    scale = b.abs().max().item()
    return (a - b).abs().max().item() / (scale if scale > 0 else 1.0)


def dump(gptstep, shape, d, loops):
    env = dict(os.environ, DT_BLAS="0" if loops else "1")
    p = subprocess.run([gptstep, "--dump", d, "--threads", "1"] + shape_args(shape),
                       env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit(f"gpt_vs_torch: gptstep --dump failed (status {p.returncode}):\n"
                 f"{p.stdout}{p.stderr}")


def check(torch, gptstep, shape, verbose):
    """Compares dtlab's step 0 (sgemm and loops) with PyTorch's; returns the worst figure"""
    with tempfile.TemporaryDirectory(prefix="gpt_vs_torch.") as tmp:
        ds = {m: os.path.join(tmp, m) for m in ("sgemm", "loops")}
        for m, d in ds.items():
            dump(gptstep, shape, d, m == "loops")
        loss32, g32 = torch_step(torch, ds["sgemm"], torch.float32)
        loss64, g64 = torch_step(torch, ds["sgemm"], torch.float64)
        ours = {m: (float(open(os.path.join(d, "loss.txt")).read()),
                    read(torch, os.path.join(d, "grads.f32"), torch.float32).double())
                for m, d in ds.items()}
    lerr = max(abs(l - loss32) / abs(loss32) for l, _ in ours.values())
    print(f"check at {shape_name(shape)}: loss dtlab {ours['sgemm'][0]:.7f} (loops "
          f"{ours['loops'][0]:.7f}), torch {loss32:.7f} (fp64 {loss64:.7f}): "
          f"|dtlab - torch| / torch {lerr:.1e}")
    print(f"  {'tensor':<9} {'floats':>7} {'max|g|':>9}   max|dtlab - torch| / max|g|: "
          f"sgemm, loops;  torch fp32 vs fp64")
    worst, rest, o = lerr, 0.0, 0
    for (name, t32), (_, t64) in zip(g32, g64):
        n = t32.numel()
        rs, rl = (rel(ours[m][1][o:o + n], t32) for m in ("sgemm", "loops"))
        o += n
        worst = max(worst, rs, rl)
        later = name[0].isdigit() and not name.startswith("0.")   # blocks 1 ..
        if verbose or not later or max(rs, rl) > TOL:
            print(f"  {name:<9} {n:>7} {t32.abs().max().item():>9.3g}   {rs:>36.1e}, "
                  f"{rl:.1e};  {rel(t32, t64):.1e}{'  FAILED' if max(rs, rl) > TOL else ''}")
        elif later:
            rest = max(rest, rs, rl)
    if shape["layers"] > 1 and not verbose:
        print(f"  blocks 1..{shape['layers'] - 1}: worst {rest:.1e} (--verbose lists them)")
    return worst


# ==== the timing ====

def torch_timed(a):
    """The worker: PyTorch's step of this shape, timed as gptstep times dtlab's; prints
    one line in gptstep's form."""
    import torch
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    cfg = dict(vocab=256, seq=a.seq, embed=a.embed, heads=a.heads, layers=a.layers)
    model = make_gpt(torch, cfg)
    model.init_gpt2()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)     # betas, eps: dtlab's
    toks = torch.randint(0, 256, (8, a.batch, a.seq + 1))  # 8 batches, cycled
    times, cpu, losses, s = [], [], [], 0
    start = time.perf_counter()
    while len(times) < a.max_steps and (len(times) < 5 or time.perf_counter() - start < a.seconds):
        if s == a.warmup:
            start = time.perf_counter()
        t0, c0 = time.perf_counter(), time.process_time()
        b = toks[s % 8].clone()                             # dtlab copies its batch too
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.cross_entropy(model(b[:, :-1]).reshape(-1, 256),
                                                 b[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())                          # on the host, as dtlab's
        if s >= a.warmup:
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        s += 1
    times.sort()
    print(f"torch_gpt: L{a.layers} H{a.heads} C{a.embed} T{a.seq} batch {a.batch} threads "
          f"{torch.get_num_threads()} adam: median {1e3 * statistics.median(times):.3f} ms a "
          f"step ({1e3 * times[0]:.3f} .. {1e3 * times[-1]:.3f} over {len(times)} steps), "
          f"loss {losses[0]:.4f} -> {losses[-1]:.4f}; cpu {1e3 * statistics.median(cpu):.3f} ms "
          f"a step  [torch {torch.__version__}]")


STEP = re.compile(r"median ([0-9.]+) ms a step \(([0-9.]+) \.\..*; cpu ([0-9.]+) ms")


def steps(cmd, env=None):
    """A run of gptstep or the worker: its median step, its fastest, its median CPU time
    a step, in ms"""
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    m = STEP.search(p.stdout)
    if p.returncode == 0 and m:
        return [float(x) for x in m.groups()]
    sys.exit(f"gpt_vs_torch: {' '.join(cmd)} failed (status {p.returncode}):\n"
             f"{p.stdout}{p.stderr}")


def table(a, shapes, threads):
    print(f"\none training step of the GPT, byte tokens, Adam, fp32, on {os.cpu_count()} "
          "cores: dtlab (OpenBLAS sgemm) beside\nPyTorch eager "
          "(scaled_dot_product_attention); ms a step, the medians over rounds of")
    print("  wall: each run's median step; fastest: each run's fastest step; cpu: each run's "
          "median\n  CPU time a step (every thread's, spinning included: read it at 1 "
          "thread)")
    print(f"and the ratios dtlab/torch within each of {a.rounds} rounds, median (min-max); "
          "below 1, dtlab is faster")
    print(f"{'shape':<22} {'thr':>3} {'wall: dtlab':>11} {'torch':>7} {'ratio':<16} "
          f"{'fastest':<16} {'cpu: dtlab':>10} {'torch':>7} ratio")
    for s in shapes:
        for t in threads:
            common = shape_args(s) + ["--threads", str(t), "--seconds", str(a.seconds)]
            d, tc = [], []
            for _ in range(a.rounds):
                d.append(steps([a.gptstep, "--optim", "adam"] + common,
                               dict(os.environ, DT_BLAS="1")))
                tc.append(steps([sys.executable, os.path.abspath(__file__), "--torch-step"]
                                + common))
            r = [spread([x[i] / y[i] for x, y in zip(d, tc)]) for i in range(3)]
            dm, tm = ([statistics.median(x[i] for x in v) for i in range(3)] for v in (d, tc))
            cell = [f"{q[1]:.2f} ({q[0]:.2f}-{q[2]:.2f})" for q in r]
            print(f"{shape_name(s):<22} {t:>3} {dm[0]:>11.2f} {tm[0]:>7.2f} {cell[0]:<16} "
                  f"{cell[1]:<16} {dm[2]:>10.2f} {tm[2]:>7.2f} {cell[2]}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gptstep", default=os.path.join(os.path.dirname(HERE), "build",
                                                      "bench", "gptstep"))
    ap.add_argument("--python", help="a python3 that has torch (this one by default)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=1.0, help="timed seconds a run")
    ap.add_argument("--threads", type=counts, default=[1, 2],
                    help="thread counts (default 1,2)")
    ap.add_argument("--quick", action="store_true", help="time the default shape only")
    ap.add_argument("--check-only", action="store_true", help="the check, no timing")
    ap.add_argument("--verbose", action="store_true", help="every block's rows")
    # the worker that times PyTorch's step (this script runs it as a process of its own)
    ap.add_argument("--torch-step", action="store_true", help=argparse.SUPPRESS)
    for k in ("layers", "heads", "embed", "seq", "batch"):
        ap.add_argument(f"--{k}", type=int, default=SHAPES[0][k], help=argparse.SUPPRESS)
    ap.add_argument("--warmup", type=int, default=3, help=argparse.SUPPRESS)
    ap.add_argument("--max-steps", type=int, default=500, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_step:
        a.threads = a.threads[0]
        return torch_timed(a)
    if a.rounds < 1 or not a.seconds > 0:
        ap.error("--rounds must be at least 1 and --seconds more than 0")
    if a.python:                           # the whole script again, under a.python
        args = [x for i, x in enumerate(sys.argv[1:])
                if x != "--python" and not x.startswith("--python=")
                and sys.argv[i] != "--python"]
        try:
            os.execv(a.python, [a.python, os.path.abspath(__file__)] + args)
        except OSError as e:
            print(f"gpt_vs_torch: skipped: cannot run {a.python} ({e})")
            return 0
    try:
        import torch
    except ImportError as e:
        print(f"gpt_vs_torch: skipped: {sys.executable} cannot import torch ({e}); pip "
              "install torch, or --python a python3 that has it")
        return 0
    if not os.access(a.gptstep, os.X_OK):
        sys.exit(f"gpt_vs_torch: no {a.gptstep}: build it first (make)")
    torch.set_num_threads(1)
    print(f"gpt_vs_torch: dtlab's {a.gptstep} against PyTorch {torch.__version__}")
    worst = max(check(torch, a.gptstep, s, a.verbose) for s in (SHAPES[0], ODD))
    if worst > TOL:
        print(f"gpt_vs_torch: FAILED: dtlab's GPT differs from PyTorch's by {worst:.1e} "
              f"of a tensor's largest gradient (tolerance {TOL:g})")
        return 1
    print(f"gpt_vs_torch: the check passed: loss and every gradient within {worst:.1e} "
          f"of PyTorch's (tolerance {TOL:g})")
    if not a.check_only:
        table(a, SHAPES[:1] if a.quick else SHAPES, a.threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
