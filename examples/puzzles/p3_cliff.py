#!/usr/bin/env python3
"""Puzzle 3: a one-step configuration change moves speed a lot (a performance cliff).

A Conv1D with kernel size 1 over (batch, length, channels) is swept over its padding 0..8
(or over the kernel size, --sweep kernel). For every point the script times the forward call
and prints the implementation that ran it under each autotune policy: `heuristic` (the
default: oneDNN's first choice), `exhaustive` (every implementation oneDNN offers timed, the
fastest kept; on the GPU, cuDNN's algorithms) and `off` (the GEMM-based convolution, as
encore ran before it let oneDNN choose). The GEMM-based one falls off a cliff between padding 0
and 1 (its input stops being the GEMM's matrix and is copied out first, im2col); the others
change algorithm instead.
The C++ twin is examples/puzzles/puzzle_cliff.cpp; docs/puzzles/3-cliff.md explains a run.

  python examples/puzzles/p3_cliff.py [--full] [--sweep padding|kernel] [--threads 1]
                                      [--batch N --length N --channels N --filters N]
                                      [--reps N] [--device cpu|cuda] [--json F] [--plot F.png]
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import encore  # noqa: E402

import puzzle_cli  # noqa: E402

POLICIES = ("heuristic", "exhaustive", "off")


def measure(x, w, padding, reps):
    """(fastest ms per forward call, the conv1d autotune entry, setup ms) for one sweep point."""
    encore.autotune.clear()  # every point starts without a stored choice
    before = encore.ledger.as_dict()
    encore.conv1d(x, w, padding=padding)  # the first call pays the per-shape setup
    sync(x)
    after = encore.ledger.as_dict()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        encore.conv1d(x, w, padding=padding)
        sync(x)
        times.append((time.perf_counter() - t0) * 1e3)
    entry = next(e for e in encore.autotune.entries() if e["op"] == "conv1d")
    setup_ms = (after["autotune_ns"] - before["autotune_ns"]) / 1e6
    return min(times), entry, setup_ms


def sync(x):
    if x.device.type == "cuda":
        encore.cuda.synchronize(x.device)


def sweep(args):
    points = range(0, 9) if args.sweep == "padding" else (1, 2, 3, 4, 5)
    x = encore.normal((args.batch, args.length, args.channels), generator=encore.Generator(1)).to(args.device)
    rows = []
    for p in points:
        kernel, padding = (args.kernel, p) if args.sweep == "padding" else (p, 0)
        w = (encore.normal((kernel, args.channels, args.filters), generator=encore.Generator(2)) * 0.1).to(args.device)
        row = {"point": p, "kernel": kernel, "padding": padding}
        for policy in POLICIES:
            encore.autotune.set_policy(policy)
            ms, entry, setup = measure(x, w, padding, args.reps)
            row[f"{policy}_ms"] = ms
            row[f"{policy}_impl"] = entry["algorithm"]
            row[f"{policy}_setup_ms"] = setup
            if policy == "exhaustive":
                row["offered"] = [{"impl": i, "ms": t} for i, t in entry["timings"]]
        rows.append(row)
    encore.autotune.set_policy("heuristic")
    return rows


def print_table(rows, args):
    print(f"puzzle 3 on {args.device}: Conv1D sweep over {args.sweep}, x ({args.batch}, {args.length}, "
          f"{args.channels}), {args.filters} filters, cpu threads {encore.num_threads()}, forward ms (fastest of "
          f"{args.reps}) and the implementation per autotune policy")
    print(f"{args.sweep:>8}  " + "  ".join(f"{p + '_ms':>13}  {p + ' implementation':<26}" for p in POLICIES)
          + "  timed")
    for r in rows:
        print(f"{r['point']:>8}  " + "  ".join(f"{r[p + '_ms']:>13.3f}  {r[p + '_impl']:<26}" for p in POLICIES)
              + f"  {len(r['offered'])}")
    for p in POLICIES:
        first = rows[0]
        worst = max(rows, key=lambda r: r[f"{p}_ms"])
        print(f"{p:>10}: slowest at {args.sweep} {worst['point']}, {worst[p + '_ms'] / first[p + '_ms']:.2f}x "
              f"{args.sweep} {first['point']} ({worst[p + '_impl']} there, {first[p + '_impl']} at "
              f"{first['point']})")


def plot(rows, args, path):
    plt = puzzle_cli.pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(8, 4))
    xs = [r["point"] for r in rows]
    for policy, marker in zip(POLICIES, "os^"):
        ys = [r[f"{policy}_ms"] for r in rows]
        ax.plot(xs, ys, marker=marker, label=f"{policy} ({'GEMM-based' if policy == 'off' else 'oneDNN picks'})"
                if policy != "exhaustive" else "exhaustive (fastest timed)")
        if policy == "exhaustive":
            continue  # its names mostly repeat the heuristic's: the table lists them
        for k, (xv, yv, r) in enumerate(zip(xs, ys, rows)):
            if k == 0 or r[f"{policy}_impl"] != rows[k - 1][f"{policy}_impl"]:  # label each change
                ax.annotate(r[f"{policy}_impl"], (xv, yv), fontsize=7, xytext=(4, 8 if policy == "off" else -12),
                            textcoords="offset points")
    ax.set_xlabel(args.sweep)
    ax.set_ylabel("ms per forward call")
    ax.set_ylim(bottom=0)
    ax.set_title(f"Conv1D K={args.kernel if args.sweep == 'padding' else 'swept'} on x ({args.batch}, "
                 f"{args.length}, {args.channels}) -> {args.filters}, {encore.num_threads()} threads", fontsize=9)
    ax.legend(fontsize=8, loc="center right")
    puzzle_cli.save_figure(fig, path)


def main():
    parser = puzzle_cli.parser(__doc__, threads=1)  # a quiet measurement
    parser.add_argument("--full", action="store_true", help="the larger sizes: x (32, 4000, 256), 256 filters")
    parser.add_argument("--sweep", choices=("padding", "kernel"), default="padding")
    parser.add_argument("--kernel", type=int, default=1, help="kernel size of the padding sweep")
    parser.add_argument("--batch", type=int)
    parser.add_argument("--length", type=int)
    parser.add_argument("--channels", type=int)
    parser.add_argument("--filters", type=int)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    puzzle_cli.setup(parser, args)
    defaults = (32, 4000, 256, 256) if args.full else (16, 1000, 64, 64)
    for name, value in zip(("batch", "length", "channels", "filters"), defaults):
        if getattr(args, name) is None:
            setattr(args, name, value)
    rows = sweep(args)
    print_table(rows, args)
    if args.json:
        puzzle_cli.write_json(args.json, {"puzzle": "cliff", "threads": encore.num_threads(), "sweep": args.sweep,
                                          "shape": [args.batch, args.length, args.channels], "filters": args.filters,
                                          "kernel": args.kernel, "rows": rows})
    if args.plot:
        plot(rows, args, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
