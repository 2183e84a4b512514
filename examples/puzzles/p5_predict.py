#!/usr/bin/env python3
"""Puzzle 5: tiny-model prediction overhead ("predict is slower after compile").

Predicts one small batch at a time with a tiny Dense model, each way a program may call it,
measured by encore.compare_modes (the ways take their calls in turn), with the traces each
way made, from the ledger:

  eager              model(x) op by op (inference mode, no autograd)
  traced             encore.trace(forward): traced once, then replayed
  eager_new_batch    eager, a new batch size every call (eager does not care)
  retrace_per_call   traced, a new batch size every call: a retrace every call
  new_function       the wrong pattern: encore.trace(forward)(x) makes a new traced function
                     every call, which traces every call although the shape never changes
  Module.predict     model.predict(x): batching, a traced predict step, a NumPy copy
  predict_on_batch   model.predict_on_batch(x): one batch, traced, a NumPy copy

then the same on a medium Dense model, where the kernels dominate.

  python examples/puzzles/p5_predict.py
  options: --calls 100 --warmup 5 --tiny-batch 8 --medium-batch 64 --threads N
           --device cpu|cuda --json out.json --plot out.png
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import encore  # noqa: E402
from encore import nn  # noqa: E402

import puzzle_cli  # noqa: E402

# (name, layers, features): tiny is all framework overhead, medium all kernels.
MODELS = [
    ("tiny", lambda: [nn.Dense(16, activation="relu"), nn.Dense(1, activation="sigmoid")], 16),
    ("medium", lambda: [nn.Dense(1024, activation="relu"), nn.Dense(1024, activation="relu"),
                        nn.Dense(1, activation="sigmoid")], 512),
]
COLUMNS = ["model", "way", "per_call_us", "vs_eager", "calls", "traces", "kernel_us", "overhead_us", "trace_ms"]


def run_model(name, layers, features, batch, args, device):
    encore.manual_seed(0)
    model = nn.Sequential(layers())
    model.build((batch, features))
    model.to(device)

    def forward(x):
        with encore.no_grad(), encore.training(False):
            return model(x)

    def make(rows):
        return (encore.normal((rows, features), generator=encore.Generator(rows)).to(device),)

    def new_function(x):
        return encore.trace(forward)(x)  # the wrong pattern: a new traced function per call

    def predict(x):
        return model.predict(x, batch_size=x.shape[0])

    def predict_on_batch(x):
        return model.predict_on_batch(x)

    common = dict(steps=args.calls, warmup=args.warmup, profile_steps=args.profile_steps,
                  state=model.parameters())
    main = encore.compare_modes(forward, make, length=batch, length_axis=0,
                                modes=["eager", "traced", "eager_new_length", "traced_new_length"],
                                name=f"{name}_forward", **common)
    ways = [("eager", main["eager"]), ("traced", main["traced"]), ("eager_new_batch", main["eager_new_length"]),
            ("retrace_per_call", main["traced_new_length"])]
    reports = {"forward": main.to_dict()}
    for way, fn in (("new_function", new_function), ("Module.predict", predict),
                    ("predict_on_batch", predict_on_batch)):
        report = encore.compare_modes(fn, make(batch), modes=["eager"], name=f"{name}_{way}", **common)
        ways.append((way, report["eager"]))
        reports[way] = report.to_dict()
    # New-batch ways against eager on the same batch sizes, the others against eager.
    baseline = {"eager_new_batch": main["eager_new_length"], "retrace_per_call": main["eager_new_length"]}
    rows = []
    for way, m in ways:
        ms = m["step_ms_median"]
        rows.append({"model": name, "way": way, "input": f"{batch}x{features}", "per_call_us": 1e3 * ms,
                     "vs_eager": ms / baseline.get(way, main["eager"])["step_ms_median"],
                     "calls": m["calls"], "traces": m["traces"],
                     "kernel_us": None if m["kernel_ms"] is None else 1e3 * m["kernel_ms"],
                     "overhead_us": None if m["overhead_ms"] is None else 1e3 * max(m["overhead_ms"], 0.0),
                     "trace_ms": m["trace_ms_total"], "first_call_us": 1e3 * m["first_call_ms"]})
    return rows, reports


def conclusion(rows):
    by = {(r["model"], r["way"]): r for r in rows}
    tiny = lambda way: by[("tiny", way)]  # noqa: E731
    medium = lambda way: by[("medium", way)]  # noqa: E731
    return [
        f"tiny model: eager {tiny('eager')['per_call_us']:.3g} us per call, of which kernels "
        f"{tiny('eager')['kernel_us']:.3g} us; replaying one trace takes {tiny('traced')['per_call_us']:.3g} us "
        f"({1 / tiny('traced')['vs_eager']:.2f}x faster): the time is framework overhead and the graph removes it",
        f"a retrace every call (a new batch size each time) costs {tiny('retrace_per_call')['per_call_us']:.3g} us "
        f"per call ({tiny('retrace_per_call')['vs_eager']:.1f}x eager on the same batch sizes): "
        f"{tiny('retrace_per_call')['traces']} traces "
        f"in {tiny('retrace_per_call')['calls']} calls",
        f"a new traced function per call costs {tiny('new_function')['per_call_us']:.3g} us "
        f"({tiny('new_function')['vs_eager']:.1f}x eager): {tiny('new_function')['traces']} traces in "
        f"{tiny('new_function')['calls']} calls although the shape never changes; make the traced function once",
        f"Module.predict on one small batch: {tiny('Module.predict')['per_call_us']:.3g} us "
        f"({tiny('Module.predict')['traces']} traces in the timed calls: its predict step traced before them), "
        f"predict_on_batch {tiny('predict_on_batch')['per_call_us']:.3g} us: the batching loop and the NumPy copy "
        f"are the difference to a bare replay",
        f"medium model: eager {medium('eager')['per_call_us']:,.0f} us per call, of which kernels "
        f"{medium('eager')['kernel_us']:,.0f} us; traced {medium('traced')['per_call_us']:,.0f} us, Module.predict "
        f"{medium('Module.predict')['per_call_us']:,.0f} us: "
        + agreement([medium(w)["per_call_us"] for w in ("eager", "traced", "Module.predict")],
                    medium("eager")["kernel_us"] / medium("eager")["per_call_us"])
        + f" (a retrace per call costs {medium('retrace_per_call')['vs_eager']:.2f}x eager on the same sizes)",
    ]


def agreement(per_call, kernel_share):
    """The closing words on ways whose kernels take `kernel_share` of a call: they "converge" only
    where the slowest is within 25% of the fastest (as examples/puzzles/puzzle_cli.h says it)."""
    lo, hi = min(per_call), max(per_call)
    if hi <= 1.25 * lo:
        return f"the kernels dominate and the ways converge (within {100 * (hi / lo - 1):.0f}%)"
    return (f"the ways differ by up to {hi / lo:.1f}x although kernels are {100 * kernel_share:.0f}% of an eager "
            f"call: more than overhead can explain (the machine's load, or the kernels' own times: compare kernel_us)")


def us(v):
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def plot(path, rows, title):
    plt = puzzle_cli.pyplot()
    if plt is None:
        return
    models = sorted({r["model"] for r in rows}, key=[r["model"] for r in rows].index)
    fig, axes = plt.subplots(1, len(models), figsize=(6.5 * len(models), 4.6), squeeze=False)
    for ax, name in zip(axes[0], models):
        mine = [r for r in rows if r["model"] == name]
        ys = range(len(mine))
        # The median call split in the proportions of the profiled pass (fixed-shape ways).
        share = [r["kernel_us"] / (r["kernel_us"] + r["overhead_us"]) if r["kernel_us"] is not None else 0.0
                 for r in mine]
        kernel = [r["per_call_us"] * s for r, s in zip(mine, share)]
        ax.barh(ys, kernel, label="kernels (share from the profiled pass)")
        ax.barh(ys, [r["per_call_us"] - k for r, k in zip(mine, kernel)], left=kernel,
                label="framework overhead, tracing")
        for y, r in zip(ys, mine):
            ax.annotate(f" {us(r['per_call_us'])} us, {r['traces']} traces / {r['calls']} calls",
                        (r["per_call_us"], y), va="center", fontsize=7)
        ax.set_yticks(list(ys))
        ax.set_yticklabels([r["way"] for r in mine], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("us per call (median)")
        ax.set_title(f"{name} model, batch {mine[0]['input']}")
        ax.grid(True, axis="x", alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
        ax.set_xlim(0, max(r["per_call_us"] for r in mine) * 1.6)
    fig.suptitle(title, fontsize=9)
    puzzle_cli.save_figure(fig, path)


def main():
    p = puzzle_cli.parser(__doc__)
    p.add_argument("--calls", type=int, default=100, help="measured calls per way (median)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--profile-steps", type=int, default=5, help="profiled calls (kernel vs overhead)")
    p.add_argument("--tiny-batch", type=int, default=8)
    p.add_argument("--medium-batch", type=int, default=64)
    args = p.parse_args()
    if min(args.calls, args.tiny_batch, args.medium_batch, args.profile_steps) < 1 or args.warmup < 0:
        p.error("needs --calls, --tiny-batch, --medium-batch, --profile-steps >= 1 and --warmup >= 0")
    device = puzzle_cli.setup(p, args)
    title = puzzle_cli.header(f"puzzle 5, predict one batch at a time: medians of {args.calls} calls", device)
    print(title, flush=True)
    rows, reports = [], {}
    for (name, layers, features), batch in zip(MODELS, (args.tiny_batch, args.medium_batch)):
        model_rows, reports[name] = run_model(name, layers, features, batch, args, device)
        rows += model_rows
    print(puzzle_cli.table(rows, COLUMNS))
    print("(per call, medians; vs_eager: against eager on the same batches (eager_new_batch for the new-batch "
          "ways); traces: made during the timed calls, from the ledger; kernel_us / overhead_us: the ledger's "
          "profiled pass, fixed-shape ways only)")
    lines = conclusion(rows)
    print("\n".join(lines))
    if args.json:
        puzzle_cli.write_json(args.json, {"puzzle": "predict", "device": str(device), "threads": encore.num_threads(),
                                          "calls": args.calls, "rows": rows, "conclusion": lines, "reports": reports})
    if args.plot:
        plot(args.plot, rows, title)


if __name__ == "__main__":
    main()
