#!/usr/bin/env python3
"""Puzzle 4: layout conversions cost.

The same conv stack (convs x Conv1D(filters, 12, 'same', relu) -> GlobalAveragePooling1D ->
Dense(1, sigmoid), Adam, binary cross-entropy) trained with a traced step three ways:
  native          channels-last (encore's layout, oneDNN's `nwc`): nothing is converted
  channels_first  activations kept channels-first between layers, as a channels-first
                  framework would, so every conv is wrapped in a transpose there and back:
                  `copy` nodes in the traced graph (forward, and their gradients backward)
  blocked         encore.autotune.set_conv1d_layout('blocked'): the convolutions run in oneDNN's
                  preferred (blocked) activation layout, converted by to_blocked / from_blocked
                  nodes; the traced Plan keeps the stack blocked and converts only where it meets
                  channels-last (eager mode converts around every conv). The ledger counts the
                  conversions and their time (layout_reorders, layout_reorder_ns)
The variants take their steps in turn; per variant, of its fastest of --steps profiled steps:
its time, the conversions and their time (the `copy` or to/from_blocked kernels), the
conv kernels' time; and the traced graph's op counts and the implementation oneDNN chose for
the forward conv. The C++ twin is examples/puzzles/puzzle_layout.cpp; docs/puzzles/4-layout.md
explains a run.

  python examples/puzzles/p4_layout.py [--full] [--steps 10] [--batch 8 --length 500 --channels 64]
                                       [--filters 64 --convs 4] [--threads N] [--show-graph]
                                       [--device cpu|cuda] [--json F] [--plot F.png]
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import encore  # noqa: E402
from encore import nn, optim  # noqa: E402

import puzzle_cli  # noqa: E402

VARIANTS = ("native", "channels_first", "blocked")


def make_step(args, variant):
    encore.manual_seed(0)
    convs = [nn.Conv1D(args.filters, 12, padding="same", activation="relu") for _ in range(args.convs)]
    head = nn.Sequential([nn.GlobalAveragePooling1D(), nn.Dense(1, activation="sigmoid")])
    shape = (args.batch, args.length, args.channels)
    for c in convs:
        shape = c.build(shape)
    head.build(shape)
    params = [p for m in convs + [head] for p in m.parameters()]
    adam = optim.Adam(params, lr=1e-4)

    def forward(x):
        if variant != "channels_first":
            for c in convs:
                x = c(x)
            return head(x)
        h = x.transpose(1, 2).contiguous()  # (batch, channels, steps) between layers
        for c in convs:
            h = c(h.transpose(1, 2).contiguous()).transpose(1, 2).contiguous()
        return head(h.transpose(1, 2).contiguous())

    def step(x, y):
        adam.zero_grad()
        loss = nn.binary_crossentropy(y, forward(x))
        loss.backward()
        adam.step()
        return loss

    return encore.trace(step, name=f"step_{variant}")


def prepare(args, variant, x, y):
    """The variant's traced step, traced and replayed once under its layout: its Plan keeps the
    convolutions prepared for that layout whatever the setting is later."""
    encore.autotune.set_conv1d_layout("blocked" if variant == "blocked" else "native")
    step = make_step(args, variant)
    for _ in range(2):
        step(x, y)
    forward_impl = next((impl for key, impl in encore.autotune.conv1d_primitives()
                         if key.startswith(f"forward N={args.batch} L={args.length} ") and
                         (" blocked=(" in key) == (variant == "blocked")), "")
    encore.autotune.set_conv1d_layout("native")
    return step, forward_impl


def profiled_step(step, x, y):
    """One profiled step: its time, its kernels' time by op, and the ledger."""
    with encore.ledger.profiling():
        encore.ledger.reset()
        t0 = time.perf_counter()
        step(x, y)
        ms = (time.perf_counter() - t0) * 1e3
        return ms, encore.ledger.events(), encore.ledger.as_dict()


def measure(args, x, y):
    """The variants take their steps in turn, so whatever else the machine does hits them alike;
    each row describes its variant's fastest step."""
    steps = {v: prepare(args, v, x, y) for v in VARIANTS}
    best = {}
    for _ in range(args.steps):
        for v in VARIANTS:
            result = profiled_step(steps[v][0], x, y)
            if v not in best or result[0] < best[v][0]:
                best[v] = result
    rows = []
    for v in VARIANTS:
        step, forward_impl = steps[v]
        ms, events, ledger = best[v]
        kernel_ms = {}
        for name, category, _, ns in events:
            if category == "kernel":
                kernel_ms[name] = kernel_ms.get(name, 0.0) + ns / 1e6
        counts = step.op_counts()
        rows.append({
            "variant": v,
            "step_ms": ms,
            "graph_nodes": sum(counts.values()),
            "copy_nodes": counts.get("copy", 0),
            "copy_ms": kernel_ms.get("copy", 0.0),
            "conversion_nodes": counts.get("to_blocked", 0) + counts.get("from_blocked", 0),
            "reorders_per_step": ledger["layout_reorders"],
            "reorder_ms": ledger["layout_reorder_ns"] / 1e6,
            "conv_ms": sum(t for k, t in kernel_ms.items() if k.startswith("conv1d")),
            "forward_impl": forward_impl,
            "op_counts": counts,
            "kernel_ms": kernel_ms,
            "graph": step.graph(),
        })
    return rows


def print_table(rows, args):
    print(f"puzzle 4 on cpu: {args.convs} x Conv1D({args.filters}, 12, same, relu) training step, traced, on "
          f"({args.batch}, {args.length}, {args.channels}), cpu threads {encore.num_threads()}, fastest of "
          f"{args.steps} steps")
    head = ["variant", "step_ms", "graph_nodes", "copy_nodes", "copy_ms", "layout_nodes", "reorder_ms", "conv_ms",
            "forward conv implementation"]
    print(f"{head[0]:<15}" + "".join(f"{h:>14}" for h in head[1:-1]) + f"  {head[-1]}")
    for r in rows:
        vals = [f"{r['step_ms']:.2f}", r["graph_nodes"], r["copy_nodes"], f"{r['copy_ms']:.2f}",
                r["conversion_nodes"], f"{r['reorder_ms']:.2f}", f"{r['conv_ms']:.2f}"]
        print(f"{r['variant']:<15}" + "".join(f"{v:>14}" for v in vals) + f"  {r['forward_impl']}")
    base = rows[0]["step_ms"]
    for r in rows[1:]:
        print(f"{r['variant']}: {r['step_ms'] / base:.2f}x native's step; conversions "
              f"{r['copy_ms'] + r['reorder_ms']:.2f} ms of it")


def plot(rows, path):
    plt = puzzle_cli.pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(7, 3.5))
    names = [r["variant"] for r in rows]
    conv = [r["conv_ms"] for r in rows]
    conversions = [r["copy_ms"] + r["reorder_ms"] for r in rows]
    rest = [max(r["step_ms"] - c - v, 0.0) for r, c, v in zip(rows, conv, conversions)]
    ax.barh(names, conv, label="conv1d kernels")
    ax.barh(names, conversions, left=conv, label="layout conversions")
    ax.barh(names, rest, left=[c + v for c, v in zip(conv, conversions)], label="everything else")
    ax.set_xlabel("ms per traced training step")
    ax.invert_yaxis()
    ax.set_title(f"where a step's time goes, {encore.num_threads()} cpu threads", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    puzzle_cli.save_figure(fig, path)


def main():
    parser = puzzle_cli.parser(__doc__)
    parser.add_argument("--full", action="store_true", help="larger: 6 x Conv1D(128) on (32, 1400, 64)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch", type=int)
    parser.add_argument("--length", type=int)
    parser.add_argument("--channels", type=int)
    parser.add_argument("--filters", type=int)
    parser.add_argument("--convs", type=int)
    parser.add_argument("--show-graph", action="store_true", help="print each variant's traced graph")
    args = parser.parse_args()
    if puzzle_cli.setup(parser, args).type == "cuda":
        print(f"{parser.prog}: skipped: --device {args.device}: the layouts compared are the CPU's "
              "(cuDNN picks its own inside each call)")
        return 0
    defaults = (32, 1400, 64, 128, 6) if args.full else (8, 500, 64, 64, 4)
    for name, value in zip(("batch", "length", "channels", "filters", "convs"), defaults):
        if getattr(args, name) is None:
            setattr(args, name, value)
    x = encore.normal((args.batch, args.length, args.channels), generator=encore.Generator(1))
    y = (encore.normal((args.batch, 1), generator=encore.Generator(2)) > 0.0)
    rows = measure(args, x, y)
    if args.show_graph:
        for r in rows:
            print(f"--- {r['variant']} ---\n{r['graph']}")
    print_table(rows, args)
    if args.json:
        puzzle_cli.write_json(args.json, {"puzzle": "layout", "threads": encore.num_threads(), "rows": rows})
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
