#!/usr/bin/env python3
"""Puzzle 2: the first call per new length is slow.

A training step of Conv1D(filters, kernel, causal) -> Dense(1, sigmoid) per step, its loss on
the first 8 steps, runs over batches (batch, L, channels) for L = L0 ... L0 + lengths - 1, two
passes, under the `exhaustive` autotune policy (every implementation oneDNN offers for each
convolution is timed the first time a shape is seen). Per call: time, and from the ledger the
searches (autotunes), reused choices (autotune_hits), search time and traces, for
  eager            every new length pays the search; the second pass is fast
  traced_exact     a retrace (and a search) per length; the second pass replays
  bucketed         lengths padded up to a few sizes: a few traces, then replays
  second_process   a child process loads the choices the eager pass saved (autotune.save):
                   its first pass searches nothing
The C++ twin is examples/puzzles/puzzle_first_call.cpp; docs/puzzles/2-first-call.md explains
a run.

  python examples/puzzles/p2_first_call.py [--full] [--lengths 10] [--length0 2000]
                                           [--batch 4 --channels 64 --filters 32 --kernel 10]
                                           [--threads N] [--device cpu|cuda]
                                           [--json F] [--plot F.png]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import encore  # noqa: E402
from encore import nn, optim  # noqa: E402

import puzzle_cli  # noqa: E402

LABELED_STEPS = 8  # the loss reads the first steps only, so padding the length is exact


def make_step(args, device):
    encore.manual_seed(0)
    model = nn.Sequential([nn.Conv1D(args.filters, args.kernel, padding="causal"), nn.Dense(1, activation="sigmoid")])
    model.build((args.batch, args.length0, args.channels))
    model.to(device)
    opt = optim.SGD(model.parameters(), lr=1e-4)

    def step(x, y):
        opt.zero_grad()
        p = model(x)[:, 0:LABELED_STEPS, :].reshape(args.batch, LABELED_STEPS)
        loss = nn.binary_crossentropy(y, p)
        loss.backward()
        opt.step()
        return loss

    return step


def batch(args, length, device):
    x = encore.normal((args.batch, length, args.channels), generator=encore.Generator(length))
    y = x[:, 0:LABELED_STEPS, 0] > 0.0
    return x.to(device), y.to(device)


def run_passes(args, step, device):
    """Two passes over the lengths: per call, ms and the ledger's deltas."""
    lengths = list(range(args.length0, args.length0 + args.lengths))
    data = {n: batch(args, n, device) for n in lengths}
    calls = []
    for p in (1, 2):
        for n in lengths:
            before = encore.ledger.as_dict()
            t0 = time.perf_counter()
            step(*data[n])
            if device.type == "cuda":
                encore.cuda.synchronize(device)
            ms = (time.perf_counter() - t0) * 1e3
            after = encore.ledger.as_dict()
            calls.append({"pass": p, "length": n, "ms": ms,
                          "autotunes": after["autotunes"] - before["autotunes"],
                          "autotune_hits": after["autotune_hits"] - before["autotune_hits"],
                          "autotune_ms": (after["autotune_ns"] - before["autotune_ns"]) / 1e6,
                          "traces": after["traces"] - before["traces"]})
    return calls


def fresh():
    """Every scenario starts without per-shape state: choices, primitives, prepared kernels."""
    encore.autotune.clear()
    encore.autotune.clear_conv1d_primitives()


def scenario(name, calls):
    row = {"scenario": name, "calls": calls}
    for p in (1, 2):
        mine = [c for c in calls if c["pass"] == p]
        row[f"pass{p}_ms"] = sum(c["ms"] for c in mine)
        for k in ("autotunes", "autotune_hits", "autotune_ms", "traces"):
            row[f"pass{p}_{k}"] = sum(c[k] for c in mine)
    return row


def child(args, device):
    """The second process: loads the saved choices, then runs the eager passes."""
    encore.autotune.set_policy("exhaustive")
    encore.autotune.load(args.load)
    calls = run_passes(args, make_step(args, device), device)
    json.dump(calls, sys.stdout)


def parent(args, device):
    encore.autotune.set_policy("exhaustive")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        saved = os.path.join(tmp, "autotune.txt")
        fresh()
        rows.append(scenario("eager", run_passes(args, make_step(args, device), device)))
        encore.autotune.save(saved)
        fresh()
        exact = encore.trace(make_step(args, device), retrace_warning=0)  # a retrace per length, on purpose
        rows.append(scenario("traced_exact", run_passes(args, exact, device)))
        fresh()
        sizes = sorted({args.length0 + args.lengths * (i + 1) // 3 for i in range(3)})
        bucketed = encore.trace(make_step(args, device), shapes=encore.bucket(1, sizes, args=(0,)))
        rows.append(scenario("bucketed", run_passes(args, bucketed, device)))
        rows[-1]["buckets"] = sizes
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--load", saved]
        for k in ("lengths", "length0", "batch", "channels", "filters", "kernel", "threads", "device"):
            cmd += [f"--{k}", str(getattr(args, k))]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        rows.append(scenario("second_process", json.loads(out)))
    encore.autotune.set_policy("heuristic")
    return rows


def print_table(rows, args, device):
    print(f"puzzle 2 on {device}: a training step of Conv1D({args.filters}, {args.kernel}) over ({args.batch}, L, "
          f"{args.channels}), L = {args.length0} ... {args.length0 + args.lengths - 1}, two passes, autotune "
          f"exhaustive, cpu threads {encore.num_threads()}")
    head = ["scenario", "pass", "total_ms", "first_ms", "median_ms", "autotunes", "autotune_hits", "autotune_ms",
            "traces"]
    print("  ".join(f"{h:>14}" for h in head))
    for r in rows:
        for p in (1, 2):
            ms = sorted(c["ms"] for c in r["calls"] if c["pass"] == p)
            first = next(c["ms"] for c in r["calls"] if c["pass"] == p)
            vals = [r["scenario"], p, f"{r[f'pass{p}_ms']:.1f}", f"{first:.2f}", f"{ms[len(ms) // 2]:.2f}",
                    r[f"pass{p}_autotunes"], r[f"pass{p}_autotune_hits"], f"{r[f'pass{p}_autotune_ms']:.1f}",
                    r[f"pass{p}_traces"]]
            print("  ".join(f"{v:>14}" for v in vals))


def plot(rows, args, path):
    plt = puzzle_cli.pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(8, 4))
    for r in rows:
        ax.plot(range(1, len(r["calls"]) + 1), [c["ms"] for c in r["calls"]], marker=".", label=r["scenario"])
    ax.axvline(args.lengths + 0.5, color="grey", linestyle=":")
    ax.annotate("second pass", (args.lengths + 0.7, ax.get_ylim()[1]), fontsize=8, va="top")
    ax.set_yscale("log")
    ax.set_xlabel("call (a new length each call in the first pass)")
    ax.set_ylabel("ms per training step")
    ax.set_title(f"first call per length, autotune exhaustive, {encore.num_threads()} cpu threads", fontsize=9)
    ax.legend(fontsize=8)
    puzzle_cli.save_figure(fig, path)


def main():
    parser = puzzle_cli.parser(__doc__)
    parser.add_argument("--full", action="store_true",
                        help="the issue's sizes: Conv1D(100, 10) over (10, L, 200), L = 10000 ... 10029")
    parser.add_argument("--lengths", type=int)
    parser.add_argument("--length0", type=int)
    parser.add_argument("--batch", type=int)
    parser.add_argument("--channels", type=int)
    parser.add_argument("--filters", type=int)
    parser.add_argument("--kernel", type=int, default=10)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--load", help=argparse.SUPPRESS)
    args = parser.parse_args()
    device = puzzle_cli.setup(parser, args)
    defaults = (30, 10000, 10, 200, 100) if args.full else (10, 2000, 4, 64, 32)
    for name, value in zip(("lengths", "length0", "batch", "channels", "filters"), defaults):
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.threads = encore.num_threads()  # passed on to the second process
    if args.child:
        child(args, device)
        return 0
    rows = parent(args, device)
    print_table(rows, args, device)
    if args.json:
        puzzle_cli.write_json(args.json, {"puzzle": "first_call", "threads": encore.num_threads(),
                                          "device": str(device),
                                          "lengths": [args.length0, args.length0 + args.lengths - 1], "rows": rows})
    if args.plot:
        plot(rows, args, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
