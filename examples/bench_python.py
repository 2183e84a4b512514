#!/usr/bin/env python3
"""Overhead of encore from Python: what a Python user pays on top of the C++ runtime.

Measures (median over repeats, after warm-up):
  * eager op, small tensor: a chain of `tanh(y * 0.5)` on 4 elements (the same chain as the
    C++ bench_overhead), per op, with and without autograd recording; and `a + b` alone.
    The C++ side of each op (dispatch + kernel) is read from the ledger, so the table also
    shows the Python binding's share.
  * traced call, cache hit: `f(a, b)` for a traced `a + b`: the whole call from Python, the
    replay alone (the TracedFunction's own replay timer), and the difference (argument
    conversion, signature lookup, GIL release, result wrapping).
  * NumPy interop: from_numpy (shared) and Tensor.numpy() (shared) of a small array.
  * the small model's training step (Conv1D -> GAP -> Dropout -> Dense -> Dense), eager and
    traced, as in examples/compare_modes.py.
If PyTorch is installed, its per-op overhead for the same chain is measured too.

  python examples/bench_python.py [--ops 2000] [--repeats 30] [--steps 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import numpy as np

import encore
from encore import nn, optim


def median_of(fn, repeats, warmup=3):
    values = [fn() for _ in range(repeats + warmup)]
    return statistics.median(values[warmup:])


def chain_ns(x, ops):
    """ns per op of ops/2 rounds of tanh(y * 0.5)."""
    t0 = time.perf_counter_ns()
    y = x
    for _ in range(ops // 2):
        y = encore.tanh(y * 0.5)
    return (time.perf_counter_ns() - t0) / ops


def add_ns(a, b, ops):
    t0 = time.perf_counter_ns()
    for _ in range(ops):
        a + b
    return (time.perf_counter_ns() - t0) / ops


def cpp_ns_per_op(fn):
    """Runs fn() and returns (its result, C++ dispatch ns per op dispatched meanwhile)."""
    before = encore.ledger.as_dict()
    result = fn()
    after = encore.ledger.as_dict()
    ops = after["ops_dispatched"] - before["ops_dispatched"]
    return result, (after["dispatch_ns"] - before["dispatch_ns"]) / max(ops, 1)


def bench_eager(args, device, rows):
    for grad in (False, True):
        x = encore.full((4,), 0.5, device=device, requires_grad=grad)
        results = [cpp_ns_per_op(lambda: chain_ns(x, args.ops)) for _ in range(args.repeats + 3)][3:]
        total = statistics.median(r[0] for r in results)
        cpp = statistics.median(r[1] for r in results)
        rows.append(dict(benchmark="eager op, recording autograd" if grad else "eager op", device=str(device),
                         median_us=total / 1e3, runtime_us=cpp / 1e3, outside_us=(total - cpp) / 1e3, unit="per op"))
    a = encore.ones(4, device=device)
    b = encore.ones(4, device=device)
    results = [cpp_ns_per_op(lambda: add_ns(a, b, args.ops)) for _ in range(args.repeats + 3)][3:]
    total = statistics.median(r[0] for r in results)
    cpp = statistics.median(r[1] for r in results)
    rows.append(dict(benchmark="a + b", device=str(device), median_us=total / 1e3, runtime_us=cpp / 1e3,
                     outside_us=(total - cpp) / 1e3, unit="per op"))


def bench_traced(args, device, rows):
    @encore.trace(name="add")
    def f(a, b):
        return a + b

    a = encore.ones(4, device=device)
    b = encore.full((4,), 2.0, device=device)
    f(a, b)
    calls = 1000
    totals, replays = [], []
    for _ in range(args.repeats + 3):
        before = f.stats["replay_ms"]
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            f(a, b)
        encore.cuda.synchronize(device) if device.type == "cuda" else None
        totals.append((time.perf_counter_ns() - t0) / calls / 1e3)
        replays.append((f.stats["replay_ms"] - before) * 1e3 / calls)
    total = statistics.median(totals[3:])
    replay = statistics.median(replays[3:])
    rows.append(dict(benchmark="traced call (cache hit, 2 inputs, 1 op)", device=str(device), median_us=total,
                     runtime_us=replay, outside_us=total - replay, unit="per call"))


def bench_numpy(args, rows):
    arr = np.ones((32, 8), np.float32)
    t = encore.from_numpy(arr)

    def loop(fn):
        t0 = time.perf_counter_ns()
        for _ in range(1000):
            fn()
        return (time.perf_counter_ns() - t0) / 1000 / 1e3

    rows.append(dict(benchmark="from_numpy (shared, 32x8)", device="cpu",
                     median_us=median_of(lambda: loop(lambda: encore.from_numpy(arr)), args.repeats),
                     runtime_us=float("nan"), outside_us=float("nan"), unit="per call"))
    rows.append(dict(benchmark="Tensor.numpy() (shared, 32x8)", device="cpu",
                     median_us=median_of(lambda: loop(t.numpy), args.repeats),
                     runtime_us=float("nan"), outside_us=float("nan"), unit="per call"))


def bench_model(args, device, rows):
    encore.manual_seed(0)
    model = nn.Sequential([
        nn.Conv1D(128, 40, strides=4, padding="same"),
        nn.GlobalAveragePooling1D(),
        nn.Dropout(0.5),
        nn.Dense(64, activation="relu"),
        nn.Dense(1, activation="sigmoid"),
    ])
    model.build((32, 140, 30))
    model.to(device)
    adam = optim.Adam(model.parameters(), lr=1e-3)
    x = encore.randn(32, 140, 30, device=device)
    y = (x[:, 0, 0:1] > 0)

    def step(x, y):
        adam.zero_grad()
        loss = nn.binary_crossentropy(y, model(x))
        loss.backward()
        adam.step()
        return loss

    traced = encore.trace(step, name="small_step")
    for use_trace in (False, True):
        fn = traced if use_trace else step
        times = []
        for i in range(args.steps + 5):
            t0 = time.perf_counter_ns()
            fn(x, y)
            encore.cuda.synchronize(device) if device.type == "cuda" else None
            if i >= 5:
                times.append((time.perf_counter_ns() - t0) / 1e3)
        rows.append(dict(benchmark="small model step, " + ("traced" if use_trace else "eager"), device=str(device),
                         median_us=statistics.median(times), runtime_us=float("nan"), outside_us=float("nan"),
                         unit="per step"))


def bench_torch(args, rows):
    try:
        import torch
    except ImportError:
        return
    torch.set_grad_enabled(False)
    x = torch.full((4,), 0.5)

    def chain():
        t0 = time.perf_counter_ns()
        y = x
        for _ in range(args.ops // 2):
            y = torch.tanh(y * 0.5)
        return (time.perf_counter_ns() - t0) / args.ops

    rows.append(dict(benchmark="torch eager op (reference)", device="cpu",
                     median_us=median_of(chain, args.repeats) / 1e3,
                     runtime_us=float("nan"), outside_us=float("nan"), unit="per op"))
    torch.set_grad_enabled(True)


def print_table(rows):
    cols = ["benchmark", "device", "median_us", "runtime_us", "outside_us", "unit"]

    def text(v):
        if isinstance(v, float):
            return "-" if v != v else f"{v:.3f}"
        return str(v)

    width = {c: max(len(c), *(len(text(r[c])) for r in rows)) for c in cols}
    print("  ".join(c.ljust(width[c]) for c in cols))
    for r in rows:
        print("  ".join(text(r[c]).ljust(width[c]) for c in cols))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--device", default="cuda" if encore.cuda.is_available() else "cpu")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--skip-model", action="store_true", help="only the overhead rows")
    args = parser.parse_args()
    device = encore.Device(args.device)

    print(f"encore {encore.__version__} from Python {platform.python_version()} on {device} "
          f"(CUDA built: {encore.cuda.is_built()}, GPUs: {encore.cuda.device_count()}, "
          f"cpu threads: {encore.num_threads()})")
    print("median_us: the whole call from Python; runtime_us: inside encore's dispatcher (the ledger's dispatch time"
          " per op) or its replay timer; outside_us: the rest (binding, argument conversion, Python objects,"
          " tensor bookkeeping)\n")
    rows = []
    bench_eager(args, device, rows)
    bench_traced(args, device, rows)
    bench_numpy(args, rows)
    if not args.skip_model:
        bench_model(args, device, rows)
    bench_torch(args, rows)
    print_table(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()} for r in rows], f,
                      indent=2)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
