#!/usr/bin/env python3
"""torch_step: one training step of an MLP in PyTorch eager, timed the way
bench/stepbench.c times dtlab's: the same shapes (in -> hidden x (layers-1) -> out),
batch, activation, optimizer (SGD with momentum 0.9, or Adam), fp32, intra-op threads,
and the same timing (warm-up steps, then steps until --seconds have passed, at least 5,
each timed alone, the median quoted, the mean beside it). It prints one line in
stepbench's form:

    torch_step: 784-1024x3-10 batch 256 threads 1 sgd relu: median 9.876 ms a step (...)

--device cuda runs it on the GPU as dtlab's `train --device cuda` runs (scripts/
gpu-check.sh, bench-torch): true fp32 (TF32 off: dtlab's products are true fp32), the
batch copied to the GPU and the loss read back every step, so each step ends when the
GPU is done; --amp adds autocast to fp16 and a GradScaler (mixed precision, as dtlab's
--precision fp16). bench/step_vs_torch.py runs it beside stepbench on the CPU. Needs
PyTorch (pip install torch)."""
import argparse
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--in", dest="inp", type=int, default=784)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--out", type=int, default=10)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--optim", choices=("sgd", "adam"), default="sgd")
    ap.add_argument("--act", choices=("relu", "gelu"), default="relu")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--max-steps", type=int, default=500)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--amp", action="store_true",
                    help="autocast to fp16 with a GradScaler (cuda only)")
    a = ap.parse_args()
    if a.amp and a.device != "cuda":
        ap.error("--amp needs --device cuda")
    for name in ("inp", "hidden", "out", "layers", "batch", "threads"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('inp', 'in')} must be at least 1")
    try:
        import torch
    except ImportError as e:
        print(f"torch_step: PyTorch is not installed ({e}); pip install torch", file=sys.stderr)
        return 3
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    dev = torch.device(a.device)
    if a.device == "cuda":
        if not torch.cuda.is_available():
            print("torch_step: skipped: no GPU here (torch.cuda.is_available() is False)")
            return 0
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    widths = [a.inp] + [a.hidden] * (a.layers - 1) + [a.out]
    mods = []
    for l in range(a.layers):
        mods.append(torch.nn.Linear(widths[l], widths[l + 1]))
        if l < a.layers - 1:
            # GELU's tanh approximation, as dtlab's
            mods.append(torch.nn.ReLU() if a.act == "relu" else torch.nn.GELU("tanh"))
    model = torch.nn.Sequential(*mods).to(dev)
    if a.optim == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
    # 8 batches of data, cycled (stepbench's synthetic set has 8 batches too)
    xs = torch.randn(8, a.batch, a.inp)
    ys = torch.randint(0, a.out, (8, a.batch))
    lossf = torch.nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler("cuda") if a.amp else None
    times, first, loss, start, s = [], None, None, None, 0
    while len(times) < a.max_steps and (len(times) < 5 or time.perf_counter() - start < a.seconds):
        if s == a.warmup:
            start = time.perf_counter()
        t0 = time.perf_counter()
        x, y = xs[s % 8].clone(), ys[s % 8]       # dtlab copies its batch too
        if a.device == "cuda":
            x, y = x.to(dev), y.to(dev)           # and uploads it, as train does
        opt.zero_grad(set_to_none=False)
        if scaler is not None:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = lossf(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss = lossf(model(x), y)
            loss.backward()
            opt.step()
        lv = loss.item()                          # dtlab's loss is on the host each step
                                                  # (on a GPU: the step's end)
        if first is None:
            first = lv
        if s >= a.warmup:
            times.append(time.perf_counter() - t0)
        s += 1
    mean = sum(times) / len(times)
    times.sort()
    n = len(times)
    where = "cuda" + (" amp" if a.amp else " fp32") if a.device == "cuda" else \
        f"threads {torch.get_num_threads()}"
    print(f"torch_step: {a.inp}-{a.hidden}x{a.layers - 1}-{a.out} batch {a.batch} {where} "
          f"{a.optim} {a.act}: median {1e3 * times[n // 2]:.3f} ms a step "
          f"({1e3 * times[0]:.3f} .. {1e3 * times[-1]:.3f} over {n} steps, mean "
          f"{1e3 * mean:.3f}), loss {first:.4f} -> {lv:.4f}  [torch {torch.__version__}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
