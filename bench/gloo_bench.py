#!/usr/bin/env python3
"""gloo_bench: torch.distributed's gloo backend timed as collbench times dtlab.

    python3 bench/gloo_bench.py -n 4                        allreduce, 1 MiB .. 256 MiB
    python3 bench/gloo_bench.py -n 8 -C allreduce,allgather,reduce_scatter --csv g.csv
    python3 bench/gloo_bench.py -n 2 --device cpu -e 4M    CPU tensors (no GPU needed)

On one GPU NCCL refuses several ranks ("Duplicate GPU detected"), so the like-for-like
reference for dtlab's collectives between ranks sharing a GPU is gloo with CUDA tensors:
it stages through host memory, as dtlab's DT_P2P=staging does. This script spawns N
processes (torch.multiprocessing), joins them with a file store, and times
all_reduce, all_gather_into_tensor and reduce_scatter_tensor on random float32 tensors.

Conventions, the same as bench/collbench.c's so that a script can pair the rows:
  size S   the bytes of the largest buffer: the tensor of all_reduce, the gathered
           output of all_gather, the input of reduce_scatter (n blocks); a size is
           rounded up to whole elements, and to whole blocks (n of them) for those two
  time     one untimed call, a barrier, then --iters calls; time = the loop's seconds
           / iters (torch.cuda.synchronize before the clock stops), the slowest rank's
  algbw    S / time, GB = 10^9 bytes
  busbw    algbw * 2(n-1)/n for allreduce, algbw * (n-1)/n for allgather and
           reduce_scatter (nccl-tests' factors)
  #wrong   elements that differ from the exact answer, on separate inputs whose sums
           are exact in float32 (multiples of 1/4), counted over all ranks
all_reduce works in place (the in-place columns); the other two write another tensor
(the out-of-place columns). Warm-up: --warmup calls at the smallest size and one at the
largest, before the table. At sizes where one call is slow, fewer than --iters calls
are timed (at least 3, about --cell-seconds per cell); the header of each table and the
CSV's iters column say how many.

Exit status: 0 (also when torch, or with --device cuda a GPU, is missing: it says
"skipped:" and why), 1 when a result was wrong, 2 on a usage error.
"""
import argparse
import datetime
import os
import sys
import tempfile
import time

COLLS = ("allreduce", "allgather", "reduce_scatter")
CSV_HEADER = ("coll,impl,size_B,count,type,redop,root,"
              "time_us,algbw_GBps,busbw_GBps,wrong,"
              "inplace_time_us,inplace_algbw_GBps,inplace_busbw_GBps,inplace_wrong,"
              "nranks,wait,iters")


def parse_size(text):
    """'64K', '1M', '2G' or bytes: powers of 1024, as dtlab's dt_parse_size."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().rstrip("B") or "0"
    u = t[-1] if t[-1] in "KMG" else ""
    try:
        v = int(t[:len(t) - len(u)])
    except ValueError:
        raise argparse.ArgumentTypeError("a size like 64K or 1M, not '%s'" % text)
    if v < 0 or v * units[u] > 1 << 30:
        raise argparse.ArgumentTypeError("a size from 0 to 1G, not '%s'" % text)
    return v * units[u]


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="gloo_bench", description="torch.distributed gloo collectives, timed as "
        "collbench times dtlab's; prints collbench's table and CSV columns.")
    p.add_argument("-n", "--nranks", type=int, default=2, help="processes (default 2)")
    p.add_argument("-b", "--minbytes", type=parse_size, default=1 << 20,
                   help="smallest size (default 1M)")
    p.add_argument("-e", "--maxbytes", type=parse_size, default=256 << 20,
                   help="largest size, at most 1G (default 256M)")
    p.add_argument("-f", "--stepfactor", type=int, default=4, help="size factor (4)")
    p.add_argument("-w", "--warmup_iters", type=int, default=3, help="warm-up calls (3)")
    p.add_argument("-i", "--iters", type=int, default=10,
                   help="timed calls per cell (default 10)")
    p.add_argument("-C", "--coll", default="allreduce",
                   help="allreduce, allgather, reduce_scatter, a comma list, or all")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="where the tensors live (default cuda)")
    p.add_argument("--cell-seconds", type=float, default=3.0,
                   help="about how long one cell may take before fewer calls are timed")
    p.add_argument("--csv", help="rank 0 also writes the rows to this file")
    p.add_argument("--timeout", type=int, default=120,
                   help="seconds for the process group's start and each call (120)")
    a = p.parse_args(argv)
    names = COLLS if a.coll == "all" else tuple(a.coll.split(","))
    bad = [c for c in names if c not in COLLS]
    if bad:
        p.error("--coll wants %s, a comma list, or all; not '%s'" % (", ".join(COLLS),
                                                                      ",".join(bad)))
    a.colls = names
    if a.nranks < 1 or a.nranks > 64:
        p.error("--nranks wants 1 to 64")
    if a.stepfactor < 2 or a.iters < 1 or a.warmup_iters < 0 or a.minbytes > a.maxbytes:
        p.error("want --stepfactor >= 2, --iters >= 1, --warmup_iters >= 0, "
                "--minbytes <= --maxbytes")
    return a


# ==== sizes, as collbench's count_for ====

def blocked(coll):
    return coll in ("allgather", "reduce_scatter")


def count_for(coll, size, n, ts=4):
    """(count per call, S in bytes): count is per rank-block for the blocked ones."""
    unit = ts * (n if blocked(coll) else 1)
    count = (size + unit - 1) // unit
    return count, count * unit


def sizes(a):
    s, out = a.minbytes, []
    while s <= a.maxbytes:
        out.append(s)
        s = s * a.stepfactor if s else 1
    return out


def bus_factor(coll, n):
    return 2.0 * (n - 1) / n if coll == "allreduce" else (n - 1) / n


# ==== one rank ====

def rank_main(rank, a, store_path, queue):
    import torch
    import torch.distributed as dist

    n = a.nranks
    dev = torch.device("cuda", 0) if a.device == "cuda" else torch.device("cpu")
    if a.device == "cuda":
        torch.cuda.set_device(0)            # every rank shares the one GPU
    dist.init_process_group("gloo", init_method="file://" + store_path, rank=rank,
                            world_size=n, timeout=datetime.timedelta(seconds=a.timeout))

    def sync():
        if a.device == "cuda":
            torch.cuda.synchronize()

    api = {}                                # collective -> the form torch took

    def either(name, tensor_form, newer, list_form):
        """The newer tensor form of a collective where this torch has it, else the older
        list form; the first call finds out which, and api remembers it."""
        if api.get(name) != "list":
            try:
                tensor_form()
                api[name] = newer
                return
            except (RuntimeError, NotImplementedError, AttributeError):
                if name in api:
                    raise
        api[name] = "list"
        list_form()

    def allgather(out, inp):
        either("allgather", lambda: dist.all_gather_into_tensor(out, inp),
               "all_gather_into_tensor", lambda: dist.all_gather(list(out.chunk(n)), inp))

    def reduce_scatter(out, inp):
        either("reduce_scatter", lambda: dist.reduce_scatter_tensor(out, inp),
               "reduce_scatter_tensor",
               lambda: dist.reduce_scatter(out, list(inp.chunk(n))))

    def call(coll, bufs):
        if coll == "allreduce":
            dist.all_reduce(bufs[0])
        elif coll == "allgather":
            allgather(bufs[1], bufs[0])
        else:
            reduce_scatter(bufs[1], bufs[0])

    def buffers(coll, count, fill):
        """(input, output) for a call of count elements per block, filled by fill."""
        if coll == "allreduce":
            return (fill(count), None)
        if coll == "allgather":
            return (fill(count), torch.empty(n * count, dtype=torch.float32, device=dev))
        return (fill(n * count), torch.empty(count, dtype=torch.float32, device=dev))

    def rand(m):
        return torch.rand(m, dtype=torch.float32, device=dev) + 0.5  # never zero

    def exact(r, m, offset=0):
        """Rank r's check input: multiples of 1/4 below 10, so sums are exact."""
        i = torch.arange(offset, offset + m, device=dev, dtype=torch.int64)
        return (((i * 7 + r * 3) % 17) - 8).to(torch.float32) + 0.25 * (r + 1)

    def check(coll, count):
        """Elements of this rank's result that differ from the exact answer."""
        inp, out = buffers(coll, count, lambda m: exact(rank, m))
        call(coll, (inp, out))
        sync()
        if coll == "allreduce":
            want = sum(exact(r, count) for r in range(n))
            got = inp
        elif coll == "allgather":
            want = torch.cat([exact(r, count) for r in range(n)])
            got = out
        else:   # this rank's block of every rank's input, summed
            want = sum(exact(r, count, rank * count) for r in range(n))
            got = out
        return int((got != want).sum().item())

    def slowest(x):
        t = torch.tensor([x], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)    # CPU tensor: gloo's own path
        return float(t.item())

    def total(x):
        t = torch.tensor([x], dtype=torch.int64)
        dist.all_reduce(t)
        return int(t.item())

    def bench_coll(coll):
        rows = []
        c_min, _ = count_for(coll, a.minbytes, n)
        c_max, _ = count_for(coll, a.maxbytes, n)
        for count, times in ((c_min, a.warmup_iters), (c_max, 1 if a.warmup_iters else 0)):
            bufs = buffers(coll, count, rand)
            for _ in range(times):
                call(coll, bufs)
        sync()
        last = None
        for size in sizes(a):
            count, nbytes = count_for(coll, size, n)
            if nbytes == last:
                continue
            last = nbytes
            bufs = buffers(coll, count, rand)
            sync()
            t0 = time.perf_counter()
            call(coll, bufs)                # collbench's one untimed call
            sync()
            first = slowest(time.perf_counter() - t0)
            iters = a.iters
            if first * a.iters > a.cell_seconds:
                iters = max(3, min(a.iters, int(a.cell_seconds / max(first, 1e-9))))
            dist.barrier()
            sync()
            t0 = time.perf_counter()
            for _ in range(iters):
                call(coll, bufs)
            sync()
            t = slowest((time.perf_counter() - t0) / iters)
            del bufs
            wrong = total(check(coll, count))
            algbw = nbytes / 1e9 / t
            rows.append((coll, nbytes, count, t, algbw, algbw * bus_factor(coll, n), wrong,
                         iters))
        return rows

    rows, unsupported = [], {}
    for coll in a.colls:
        try:
            rows += bench_coll(coll)
        except (RuntimeError, NotImplementedError) as e:   # refused before any message
            unsupported[coll] = str(e).splitlines()[0][:160] if str(e) else repr(e)
            sync()
    if rank == 0:
        queue.put((rows, dict(api), unsupported, torch.__version__,
                   torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu"))
    dist.barrier()
    dist.destroy_process_group()

# ==== printing ====

def cells(coll, t, algbw, busbw, wrong):
    """(out-of-place, in-place) cells: all_reduce runs in place, the others do not."""
    have = ("%7s  %6.2f  %6.2f  %5d" % (fmt_time(t), algbw, busbw, wrong),
            "%.3f,%.6f,%.6f,%d" % (t * 1e6, algbw, busbw, wrong))
    none = ("%7s  %6s  %6s  %5s" % ("-", "-", "-", "-"), ",,,")
    return (none, have) if coll == "allreduce" else (have, none)


def fmt_time(sec):
    us = sec * 1e6
    return "%7.0f" % us if us >= 10000 else "%7.1f" % us if us >= 100 else "%7.2f" % us


def report(a, rows, api, unsupported, version, gpu):
    n = a.nranks
    print("# gloo_bench: torch.distributed gloo, in collbench's format")
    print("# nranks %d minBytes %d maxBytes %d step: %d(factor) warmup iters: %d iters: %d "
          "validation: 1 device: %s" % (n, a.minbytes, a.maxbytes, a.stepfactor,
                                        a.warmup_iters, a.iters, a.device))
    print("# torch %s, gloo, %s tensors on %s; calls: %s" % (
        version, a.device, gpu, ", ".join("%s=%s" % kv for kv in sorted(api.items()))
        or "all_reduce"))
    csv = open(a.csv, "w") if a.csv else None
    if csv:
        csv.write(CSV_HEADER + "\n")
    for coll in a.colls:
        mine = [r for r in rows if r[0] == coll]
        if coll in unsupported:
            print("#\n# %s: not run: gloo refused it here: %s" % (coll, unsupported[coll]))
            continue
        print("#\n# %s: torch.distributed (gloo)%s" % (
            coll, " (reduce_scatter_tensor on gloo: an allreduce, then this rank's chunk)"
            if coll == "reduce_scatter" else ""))
        print("# %10s  %12s  %8s  %6s  %6s           out-of-place"
              "                       in-place" % ("", "", "", "", ""))
        print("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s  %s" % (
            "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
            "time", "algbw", "busbw", "#wrong", "impl"))
        for coll_, nbytes, count, t, algbw, busbw, wrong, iters in mine:
            op = "none" if coll == "allgather" else "sum"
            oop, inp = cells(coll, t, algbw, busbw, wrong)
            print("%12d  %12d  %8s  %6s  %6d  %s  %s  gloo%s" % (
                nbytes, count, "float", op, -1, oop[0], inp[0],
                "" if iters == a.iters else " (%d iters)" % iters))
            if csv:
                csv.write("%s,gloo,%d,%d,float,%s,-1,%s,%s,%d,gloo,%d\n" % (
                    coll, nbytes, count, op, oop[1], inp[1], n, iters))
    if csv:
        csv.close()
    wrong = sum(r[6] for r in rows)
    print("# Wrong results        : %d %s" % (wrong, "FAILED" if wrong else "OK"))
    avg = sum(r[5] for r in rows) / len(rows) if rows else 0
    print("# Avg bus bandwidth    : %g (gloo)\n#" % avg)
    return wrong


def main(argv):
    a = parse_args(argv)
    try:
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp
    except ImportError as e:
        print("gloo_bench: skipped: torch is not installed here (%s)" % e)
        return 0
    if not dist.is_available() or not dist.is_gloo_available():
        print("gloo_bench: skipped: this torch has no gloo backend")
        return 0
    if a.device == "cuda" and not torch.cuda.is_available():
        print("gloo_bench: skipped: no GPU here (torch.cuda.is_available() is False)")
        return 0
    # Gloo finds its address through the host name, which a container may not resolve:
    # every rank is on this host, so the loopback interface will do.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    with tempfile.TemporaryDirectory(prefix="gloo_bench.") as d:
        ctx = mp.get_context("spawn")
        queue = ctx.SimpleQueue()
        mp.start_processes(rank_main, args=(a, os.path.join(d, "store"), queue),
                           nprocs=a.nranks, join=True, start_method="spawn")
        rows, api, unsupported, version, gpu = queue.get()
    return 1 if report(a, rows, api, unsupported, version, gpu) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
