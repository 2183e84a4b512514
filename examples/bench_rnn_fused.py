#!/usr/bin/env python3
"""The CPU's fused LSTM / GRU (oneDNN's primitives) against the composed ones: one
forward+backward step (loss = mean of the sequence output, no optimizer) of
LSTM(units, tanh, return_sequences) (--cell gru: GRU, reset_after) on (batch, length, 16),
traced, the two implementations' steps taken in turn after warm-up. Prints the median step of
each and their ratio; --json FILE writes the same as JSON.

  python examples/bench_rnn_fused.py [--steps 5] [--warmup 1] [--batch 32] [--length 400]
                                     [--units 512] [--cell lstm|gru] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import encore
from encore import nn


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=5, help="measured steps per implementation")
    p.add_argument("--warmup", type=int, default=1, help="steps per implementation before measuring")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--length", type=int, default=400)
    p.add_argument("--units", type=int, default=512)
    p.add_argument("--cell", choices=["lstm", "gru"], default="lstm")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args()

    g = encore.Generator(1)
    x = encore.normal((args.batch, args.length, 16), generator=g)
    steps = {}
    for impl in ("auto", "composed"):
        encore.manual_seed(0)
        cell = nn.LSTM if args.cell == "lstm" else nn.GRU
        layer = cell(args.units, return_sequences=True, implementation=impl)
        layer.build((args.batch, args.length, 16))

        def step(x, layer=layer):
            for q in layer.parameters():
                q.grad = None
            loss = encore.mean(layer(x))
            loss.backward()
            return loss

        steps[impl] = (layer, encore.trace(step))
    assert steps["auto"][0].uses_onednn(x) and not steps["composed"][0].uses_onednn(x)

    times = {"fused": [], "composed": []}
    for i in range(args.warmup + args.steps):
        for name, impl in (("fused", "auto"), ("composed", "composed")):
            t0 = time.perf_counter()
            steps[impl][1](x).item()
            if i >= args.warmup:
                times[name].append(time.perf_counter() - t0)

    fused_ms = statistics.median(times["fused"]) * 1e3
    composed_ms = statistics.median(times["composed"]) * 1e3
    print(f"{args.cell.upper()}({args.units}, tanh) on ({args.batch}, {args.length}, 16), forward+backward, "
          f"traced, threads {encore.num_threads()}, median of {args.steps} steps after {args.warmup} warm-up")
    print(f"{'implementation':<15} {'step_ms':>10} {'vs composed':>12}")
    print(f"{'fused (oneDNN)':<15} {fused_ms:>10.1f} {fused_ms / composed_ms:>12.2f}")
    print(f"{'composed':<15} {composed_ms:>10.1f} {1.0:>12.2f}")
    result = {"cell": args.cell, "batch": args.batch, "length": args.length, "units": args.units,
              "threads": encore.num_threads(), "steps": args.steps, "fused_ms": fused_ms,
              "composed_ms": composed_ms,
              "fused_steps_ms": [t * 1e3 for t in times["fused"]],
              "composed_steps_ms": [t * 1e3 for t in times["composed"]]}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
