#!/usr/bin/env python3
"""Puzzle 1: eager vs graph across model and data sizes (the "TF2 is slower than TF1" question).

Trains the benchmark models (benchmark_models.py: small, medium, large Conv1D stacks, the
question's Conv1D+Flatten and its BiLSTM; Adam(1e-4) + binary cross-entropy, channels-last)
with encore.compare_modes, eager and traced, steps taken in turn, and splits each step into
kernel time and framework overhead from the ledger's profiled pass. Graph mode removes the
overhead, never the kernels: the speedup is bounded by (kernel + overhead) / kernel.

  python examples/puzzles/p1_eager_vs_graph.py            # a subset: a few minutes on 2 cores
  python examples/puzzles/p1_eager_vs_graph.py --full     # every model x data size (long)
  options: --runs small@140,medium@1400 --batch 32 --steps 10 --warmup 2 --threads N
           --device cpu|cuda --json out.json --plot out.png
Runs are MODEL@LENGTH, or MODEL@LENGTH:BATCH for another batch size than --batch; data is
(batch, LENGTH, 30), or (batch, LENGTH, 16) for flatten and bilstm. small@140:1 (one sample a
step) is where the overhead shows. A model its data is too short for (large@140) is skipped
with encore's error.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import encore  # noqa: E402
from encore import nn  # noqa: E402

import benchmark_models  # noqa: E402
import puzzle_cli  # noqa: E402

FULL = ["small@140:1", "small@140", "small@1400", "small@14000", "medium@140", "medium@1400", "medium@14000",
        "large@140", "large@1400", "large@14000", "flatten@400", "bilstm@400"]
DEFAULT = ["small@140:1", "small@140", "small@1400", "medium@140", "flatten@400"]
COLUMNS = ["run", "input", "nodes", "eager_ms", "traced_ms", "speedup", "kernel_ms", "eager_overhead_ms",
           "traced_overhead_ms", "overhead_share", "bound", "us_per_node"]


def parse_run(run, default_batch):
    """MODEL@LENGTH or MODEL@LENGTH:BATCH as (model, shape), or None when it is neither."""
    model, _, rest = run.partition("@")
    length, _, batch = rest.partition(":")
    if model not in benchmark_models.MODELS or not length.isdigit() or not (batch == "" or batch.isdigit()):
        return None
    shape = (int(batch) if batch else default_batch, int(length), benchmark_models.features(model))
    return (model, shape) if min(shape) >= 1 else None


def measure(run, model, shape, args, device):
    """One row: compare_modes' eager and traced modes on the run; None (and the reason) when the
    model cannot take that length."""
    encore.manual_seed(0)
    try:
        net, adam = benchmark_models.build(model, shape)
    except encore.ShapeError as e:
        return None, str(e)
    net.to(device)
    g = encore.Generator(1)
    x = encore.normal(shape, generator=g).to(device)
    y = (encore.uniform((shape[0], 1), generator=g) > 0.5).to(device)
    report = encore.compare_modes(model=net, loss=nn.binary_crossentropy, optimizer=adam, data=(x, y),
                                  modes=["eager", "traced"], steps=args.steps, warmup=args.warmup,
                                  profile_steps=args.profile_steps, name=run)
    eager, traced = report["eager"], report["traced"]
    nodes = traced["records"][0]["nodes"]
    eager_total = eager["kernel_ms"] + eager["overhead_ms"]
    row = {
        "run": run, "input": "x".join(map(str, shape)), "nodes": nodes,
        "eager_ms": eager["step_ms_median"], "traced_ms": traced["step_ms_median"],
        "speedup": traced["speedup"], "kernel_ms": eager["kernel_ms"], "traced_kernel_ms": traced["kernel_ms"],
        "eager_overhead_ms": max(eager["overhead_ms"], 0.0), "traced_overhead_ms": max(traced["overhead_ms"], 0.0),
        # Share of the eager step that is not kernels: what a graph can remove at most.
        "overhead_share": max(eager["overhead_ms"], 0.0) / eager_total,
        "bound": eager_total / eager["kernel_ms"],
        "us_per_node": 1e3 * max(eager["overhead_ms"], 0.0) / nodes,
        "first_eager_ms": eager["first_call_ms"], "first_traced_ms": traced["first_call_ms"],
        "trace_ms": traced["trace_ms_total"], "break_even_step": traced["break_even_step"],
    }
    return row, report


def conclusion(rows):
    """Where graph mode helps and where it cannot, in the measured numbers."""
    lines = []
    for r in rows:
        if r["bound"] >= 1.05 and r["speedup"] >= 1.1:
            lines.append(f"graph mode helps {r['run']}: {r['overhead_share']:.0%} of its eager step is framework "
                         f"overhead ({r['eager_overhead_ms']:.3g} ms over {r['nodes']} ops, "
                         f"{r['us_per_node']:.3g} us each); replay removes most of it: {r['speedup']:.2f}x")
        elif r["bound"] < 1.05 and r["speedup"] >= 1.1:
            lines.append(f"{r['run']}: {r['speedup']:.2f}x although overhead is {r['overhead_share']:.1%} of the eager "
                         f"step: the kernels themselves took {r['kernel_ms']:.4g} ms eager, "
                         f"{r['traced_kernel_ms']:.4g} ms traced (memory planned once instead of allocated per step, "
                         f"or a busy machine: more --steps tell)")
        elif r["bound"] < 1.05:
            lines.append(f"graph mode cannot help {r['run']}: kernels take {r['kernel_ms']:.4g} ms of its "
                         f"{r['kernel_ms'] + r['eager_overhead_ms']:.4g} ms eager step; removing all overhead gives "
                         f"at most {r['bound']:.3f}x (measured {r['speedup']:.2f}x)")
        else:
            lines.append(f"{r['run']}: overhead is {r['overhead_share']:.0%} of the eager step: at most "
                         f"{r['bound']:.2f}x, measured {r['speedup']:.2f}x")
    lines.append("the same model gains less as its data grows: kernel time grows with the data, the per-op "
                 "overhead does not")
    return lines


def plot(path, rows, title):
    plt = puzzle_cli.pyplot()
    if plt is None or not rows:
        return
    names = [r["run"] for r in rows]
    xs = range(len(rows))
    fig, (times, split) = plt.subplots(1, 2, figsize=(13, 4.8))
    w = 0.38
    times.bar([x - w / 2 for x in xs], [r["eager_ms"] for r in rows], w, label="eager")
    times.bar([x + w / 2 for x in xs], [r["traced_ms"] for r in rows], w, label="traced")
    for x, r in zip(xs, rows):
        times.annotate(f"{r['speedup']:.2f}x", (x, max(r["eager_ms"], r["traced_ms"])), ha="center",
                       va="bottom", fontsize=8)
    times.set_yscale("log")
    times.set_ylabel("ms per training step (median)")
    times.set_title("per step: eager vs traced (label: speedup)")
    kernel = [100 * (1 - r["overhead_share"]) for r in rows]
    overhead = [100 * r["overhead_share"] for r in rows]
    split.bar(xs, kernel, label="kernels")
    split.bar(xs, overhead, bottom=kernel, label="framework overhead")
    split.set_ylabel("% of the eager step")
    split.set_title("where the eager step goes (ledger, profiled pass)")
    split.set_ylim(0, 118)  # room for the legend above the bars
    for ax in (times, split):
        ax.set_xticks(list(xs))
        ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8, ncol=2, loc="upper left")
    fig.suptitle(title, fontsize=9)
    puzzle_cli.save_figure(fig, path)


def main():
    p = puzzle_cli.parser(__doc__)
    p.add_argument("--runs", help="comma-separated MODEL@LENGTH or MODEL@LENGTH:BATCH (default %s)" % ",".join(DEFAULT))
    p.add_argument("--full", action="store_true", help="every model x data size: " + ",".join(FULL))
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=10, help="measured steps per mode (median)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--profile-steps", type=int, default=5, help="profiled steps (kernel vs overhead)")
    args = p.parse_args()
    if args.full and args.runs:
        p.error("--full and --runs exclude each other")
    if args.batch < 1 or args.steps < 1 or args.warmup < 0 or args.profile_steps < 1:
        p.error("needs --batch >= 1, --steps >= 1, --warmup >= 0, --profile-steps >= 1")
    device = puzzle_cli.setup(p, args)
    runs = FULL if args.full else (args.runs.split(",") if args.runs else DEFAULT)
    parsed = {run: parse_run(run, args.batch) for run in runs}
    for run, spec in parsed.items():
        if spec is None:
            p.error(f"--runs: {run!r} is not MODEL@LENGTH or MODEL@LENGTH:BATCH "
                    f"(models: {', '.join(benchmark_models.MODELS)})")
    title = puzzle_cli.header(f"puzzle 1, eager vs graph: medians of {args.steps} training steps",
                              device)
    print(title, flush=True)
    rows, reports, skipped = [], {}, {}
    for run in runs:
        row, report = measure(run, *parsed[run], args, device)
        if row is None:
            skipped[run] = report
            print(f"{run}: skipped: {report}", flush=True)
            continue
        rows.append(row)
        reports[run] = report.to_dict()
        print(f"{run}: eager {row['eager_ms']:.4g} ms, traced {row['traced_ms']:.4g} ms", flush=True)
    print()
    print(title)
    print(puzzle_cli.table(rows, COLUMNS))
    print("(ms per training step; kernel_ms and the overheads from the ledger's profiled pass; overhead_share: "
          "the eager step's non-kernel share; bound: eager / kernel, the most a graph can give)")
    lines = conclusion(rows)
    print("\n".join(lines))
    if args.json:
        puzzle_cli.write_json(args.json, {
            "puzzle": "eager_vs_graph", "device": str(device), "threads": encore.num_threads(),
            "batch": args.batch, "steps": args.steps, "rows": rows, "skipped": skipped,
            "conclusion": lines, "reports": reports})
    if args.plot:
        plot(args.plot, rows, title)


if __name__ == "__main__":
    main()
