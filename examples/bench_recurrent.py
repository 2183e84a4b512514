#!/usr/bin/env python3
"""The recurrent benchmark model of issues 12 and 14 (`bilstm` in
examples/puzzles/benchmark_models.py), one training step eager and traced.

  Bidirectional(LSTM(512, relu, return_sequences)) -> LSTM(512, relu, return_sequences)
  -> Conv1D(128, 400, strides=4, 'same') -> Flatten -> Dense(256, relu) -> Dropout(0.5)
  -> Dense(128, relu) -> Dense(64, relu) -> Dense(1, sigmoid); Adam(1e-4) + binary
  cross-entropy on (32, 400, 16).

Eager and traced steps are taken in turn (same model, same data) after warm-up; the table
gives the median step of each, the traced/eager ratio, the ops dispatched per eager step and
the thread count; --json FILE writes the same as JSON. --batch, --length and --units make a
quick smoke run (e.g. --batch 4 --length 24 --units 32); --cell gru swaps both recurrent layers
for GRUs. --profile then takes one more eager and one more traced step with the ledger's
profiling on and prints where each step's time goes: kernel time per op (summed over its calls),
the kernels' total, and the rest of the step (dispatch, autograd, allocation; replay's own work).

  python examples/bench_recurrent.py [--steps 3] [--warmup 1] [--batch 32] [--length 400]
                                     [--units 512] [--cell lstm|gru] [--profile] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import encore
from encore import nn, optim

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "puzzles"))
from benchmark_models import build_encore, layers_of  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=3, help="measured steps per mode")
    p.add_argument("--warmup", type=int, default=1, help="steps per mode before measuring")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--length", type=int, default=400)
    p.add_argument("--units", type=int, default=512)
    p.add_argument("--cell", choices=["lstm", "gru"], default="lstm")
    p.add_argument("--profile", action="store_true", help="print kernel time per op, eager and traced")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args()

    encore.manual_seed(0)
    model = build_encore(layers_of("bilstm", units=args.units, cell=args.cell))
    model.build((args.batch, args.length, 16))
    adam = optim.Adam(model.parameters(), lr=1e-4)

    def step(x, y):
        adam.zero_grad()
        loss = nn.binary_crossentropy(y, model(x))
        loss.backward()
        adam.step()
        return loss

    traced = encore.trace(step)
    g = encore.Generator(1)
    x = encore.normal((args.batch, args.length, 16), generator=g)
    y = encore.gt(encore.uniform((args.batch, 1), generator=g), 0.5)

    def timed(fn):
        t0 = time.perf_counter()
        fn(x, y).item()
        return time.perf_counter() - t0

    times = {"eager": [], "traced": []}
    for i in range(args.warmup + args.steps):
        ops_before = encore.ledger.as_dict()["ops_dispatched"]
        eager_s = timed(step)
        ops_per_eager_step = encore.ledger.as_dict()["ops_dispatched"] - ops_before
        traced_s = timed(traced)
        if i >= args.warmup:
            times["eager"].append(eager_s)
            times["traced"].append(traced_s)

    eager_ms = statistics.median(times["eager"]) * 1e3
    traced_ms = statistics.median(times["traced"]) * 1e3
    threads = os.environ.get("OMP_NUM_THREADS", str(os.cpu_count()))
    print(f"{args.cell} model on ({args.batch}, {args.length}, 16), units {args.units}, "
          f"{model.num_parameters()} parameters, threads {threads}, "
          f"median of {args.steps} steps after {args.warmup} warm-up")
    print(f"{'mode':<8} {'step_ms':>12} {'vs eager':>9}")
    print(f"{'eager':<8} {eager_ms:>12.1f} {1.0:>9.2f}")
    print(f"{'traced':<8} {traced_ms:>12.1f} {traced_ms / eager_ms:>9.2f}")
    print(f"ops dispatched per eager step: {ops_per_eager_step}")
    result = {
        "model": f"bi{args.cell}", "batch": args.batch, "length": args.length, "units": args.units,
        "threads": threads, "steps": args.steps, "eager_ms": eager_ms, "traced_ms": traced_ms,
        "eager_over_traced": eager_ms / traced_ms, "ops_per_eager_step": ops_per_eager_step,
        "eager_steps_ms": [t * 1e3 for t in times["eager"]],
        "traced_steps_ms": [t * 1e3 for t in times["traced"]],
    }
    if args.profile:
        result["profile"] = profile({"eager": step, "traced": traced}, timed)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    print(json.dumps(result))


def profile(fns, timed):
    """One profiled step of each function: kernel ms per op and calls, the kernels' total and the
    step's wall time; printed as a table, returned for the JSON."""
    per_mode = {}
    for mode, fn in fns.items():
        before = len(encore.ledger.events())
        with encore.ledger.profiling():
            wall_ms = timed(fn) * 1e3
        ops = {}
        for name, category, _, duration_ns in encore.ledger.events()[before:]:
            if category == "kernel":
                ms, calls = ops.get(name, (0.0, 0))
                ops[name] = (ms + duration_ns / 1e6, calls + 1)
        per_mode[mode] = {"wall_ms": wall_ms, "kernel_ms": sum(ms for ms, _ in ops.values()),
                          "ops": {k: {"ms": ms, "calls": n} for k, (ms, n) in ops.items()}}
    names = sorted({n for m in per_mode.values() for n in m["ops"]},
                   key=lambda n: -max(m["ops"].get(n, {"ms": 0})["ms"] for m in per_mode.values()))
    print(f"\n{'op (one profiled step)':<34}" + "".join(f"{m + ' ms':>12}{'calls':>7}" for m in per_mode))
    for name in names:
        cells = "".join(f"{m['ops'].get(name, {'ms': 0})['ms']:>12.1f}{m['ops'].get(name, {'calls': 0})['calls']:>7}"
                        for m in per_mode.values())
        print(f"{name:<34}{cells}")
    for label, key in (("kernels, total", "kernel_ms"), ("step (wall)", "wall_ms")):
        print(f"{label:<34}" + "".join(f"{m[key]:>12.1f}{'':>7}" for m in per_mode.values()))
    print(f"{'outside kernels':<34}" + "".join(f"{m['wall_ms'] - m['kernel_ms']:>12.1f}{'':>7}"
                                                for m in per_mode.values()))
    return per_mode


if __name__ == "__main__":
    main()
