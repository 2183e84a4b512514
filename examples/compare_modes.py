#!/usr/bin/env python3
"""The same training step run eagerly and traced, on the models where the difference is
instructive, in one table -- from Python (the C++ twin is examples/compare_modes.cpp).

  models   small       Conv1D(128, 40, strides 4, same) -> GAP -> Dropout -> Dense(64) -> Dense(1)
                       batch (32, 140, 30): kernel-dominated
           tiny_dense  Dense(32, relu) per step -> GAP -> Dense(1), batch (32, 4, 8):
                       overhead-dominated
           lstm        Bidirectional(LSTM(units)) -> Dense(1) on (32, length, 16)
                       (--lstm; the medium model is --lstm-units 512 --lstm-length 400)
  modes    eager              every op dispatched as it is called
           eager_new_length   eager, a new sequence length every call (per-shape setup)
           traced             one trace, then replays
           traced_new_length  a new length every call: a retrace per call
           traced_bucket      new lengths, padded to buckets: few traces. A cost demo only:
                              these models pool (or recur) over the padded steps, so their
                              results differ from eager (bucketing is exact only for
                              length-equivariant functions, docs/ARCHITECTURE.md)

Columns: first_call_ms (includes tracing and per-shape setup), step_ms_median (after
warm-up; for eager and traced, from steps of the two taken in turn), traces, trace_ms_total /
per trace (trace + plan + capture), autotune_ms, and the kernel time vs framework overhead
per step (from a profiled pass). --json FILE writes the rows; --plot FILE.png draws the per-step time of each mode and the cumulative time against
steps (where a trace pays for itself), with matplotlib when it is installed.

  python examples/compare_modes.py [--steps 30] [--device cpu|cuda] [--json out.json]
                                   [--plot modes.png] [--lstm [--lstm-units N --lstm-length N]]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from dataclasses import dataclass, field, replace
from typing import Callable, List

import encore
from encore import nn, optim

MODES = ["eager", "eager_new_length", "traced", "traced_new_length", "traced_bucket"]


@dataclass
class Model:
    name: str
    input: tuple  # batch, steps, features
    build: Callable[[], nn.Sequential]
    buckets: List[int]


def models(args) -> List[Model]:
    m = [
        Model("small", (32, 140, 30), lambda: nn.Sequential([
            nn.Conv1D(128, 40, strides=4, padding="same"),
            nn.GlobalAveragePooling1D(),
            nn.Dropout(0.5),
            nn.Dense(64, activation="relu"),
            nn.Dense(1, activation="sigmoid"),
        ]), [160, 192, 224]),
        Model("tiny_dense", (32, 4, 8), lambda: nn.Sequential([
            nn.Dense(32, activation="relu"),
            nn.GlobalAveragePooling1D(),
            nn.Dense(1, activation="sigmoid"),
        ]), [16, 32, 64]),
    ]
    if args.lstm:
        units, length = args.lstm_units, args.lstm_length
        m.append(Model("lstm", (32, length, 16), lambda: nn.Sequential([
            nn.Bidirectional(nn.LSTM(units)),
            nn.Dense(1, activation="sigmoid"),
        ]), [length + 16, length + 32, length + 64]))
    return m


def batch(shape, length, seed, device):
    g = encore.Generator(seed)
    x = encore.normal((shape[0], length, shape[2]), generator=g)
    y = (x[:, 0:1, 0:1].reshape(shape[0], 1) > 0.0)
    return x.to(device), y.to(device)


@dataclass
class Result:
    first_ms: float = 0.0
    step_ms: float = 0.0
    kernel_ms: float = math.nan
    overhead_ms: float = math.nan
    trace_ms: float = 0.0
    autotune_ms: float = 0.0
    capture_ms: float = 0.0
    traces: int = 0
    ops_per_step: int = 0
    last_reason: str = ""
    step_times: List[float] = field(default_factory=list)  # every call, the first included


def sync(device):
    if device.type == "cuda":
        encore.cuda.synchronize(device)


class Runner:
    """One mode's training setup: a fresh model and optimizer from the same seed, its step
    (eager or traced), and its batches. Creating one clears the per-shape caches: every mode
    starts cold, and per-shape setup is part of what its first call costs."""

    def __init__(self, model: Model, mode: str, device):
        encore.autotune.clear_conv1d_primitives()
        encore.autotune.clear()
        encore.manual_seed(0)
        net = model.build()
        net.build(model.input)
        net.to(device)
        adam = optim.Adam(net.parameters(), lr=1e-3)

        def step(x, y):
            adam.zero_grad()
            loss = nn.binary_crossentropy(y, net(x))
            loss.backward()
            adam.step()
            return loss

        self.model, self.device = model, device
        self.new_lengths = mode in ("eager_new_length", "traced_new_length", "traced_bucket")
        shapes = encore.bucket(1, model.buckets) if mode == "traced_bucket" else None
        self.traced = encore.trace(step, name=f"{model.name}_{mode}", shapes=shapes, retrace_warning=0)
        self.fn = self.traced if mode.startswith("traced") else step
        self.fixed = [batch(model.input, model.input[1], 10 + i, device) for i in range(4)]

    def call(self, i: int) -> float:
        """Call ``i``, timed in ms: fixed-shape modes cycle over four batches, new-length modes
        use length base + 1 + i."""
        if self.new_lengths:
            x, y = batch(self.model.input, self.model.input[1] + 1 + i, 100 + i, self.device)
        else:
            x, y = self.fixed[i % 4]
        sync(self.device)
        t0 = time.perf_counter()
        self.fn(x, y)
        sync(self.device)
        return (time.perf_counter() - t0) * 1e3


def measure(runner: Runner, steps: int) -> Result:
    tune0 = encore.ledger.as_dict()["autotune_ns"]
    r = Result()
    ms = []
    warmup = 0 if runner.new_lengths else 3
    for i in range(steps + warmup):
        ops0 = encore.ledger.as_dict()["ops_dispatched"]
        t = runner.call(i)
        r.step_times.append(t)
        if i == 0:
            r.first_ms = t
        if i >= warmup and (runner.new_lengths or i > 0):
            ms.append(t)
        r.ops_per_step = encore.ledger.as_dict()["ops_dispatched"] - ops0
    r.step_ms = statistics.median(ms)
    r.autotune_ms = (encore.ledger.as_dict()["autotune_ns"] - tune0) / 1e6
    stats = runner.traced.stats
    r.traces = stats["traces"]
    for rec in stats["records"]:
        r.trace_ms += rec["total_ms"]
        r.capture_ms += rec["capture_ms"] + rec["instantiate_ms"]
    if stats["records"]:
        r.last_reason = stats["records"][-1]["reason"]
    # Kernel time vs the rest, from a profiled pass over the same work (fixed shape): both
    # measured in that pass, so the timers' own cost lands on both sides alike.
    if not runner.new_lengths:
        k0 = encore.ledger.as_dict()["kernel_ns"]
        profiled = 10
        with encore.ledger.profiling():
            profiled_ms = sum(runner.call(i) for i in range(profiled)) / profiled
        r.kernel_ms = (encore.ledger.as_dict()["kernel_ns"] - k0) / 1e6 / profiled
        r.overhead_ms = profiled_ms - r.kernel_ms
    return r


def paired_medians(eager: Runner, traced: Runner, steps: int):
    """Eager and traced steps taken in turn: whatever the machine does meanwhile (other
    tenants, clock changes) hits both alike, so their ratio holds even where absolute times
    drift. The first pairs redo eager's per-shape setup, which the traced runner cleared."""
    e, t = [], []
    for i in range(steps + 2):
        te, tt = eager.call(i), traced.call(i)
        if i >= 2:
            e.append(te)
            t.append(tt)
    return statistics.median(e), statistics.median(t)


def print_table(rows):
    cols = list(rows[0].keys())

    def text(v):
        if isinstance(v, float):
            return "-" if math.isnan(v) else f"{v:.6g}"
        return str(v)

    width = {c: max(len(c), *(len(text(r[c])) for r in rows)) for c in cols}
    print("  ".join(c.ljust(width[c]) for c in cols))
    for r in rows:
        print("  ".join(text(r[c]).ljust(width[c]) for c in cols))


def plot(path, results, device):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed: skipping the plot {path} (pip install matplotlib)")
        return
    names = list(results)
    fig, axes = plt.subplots(len(names), 2, figsize=(12, 4 * len(names)), squeeze=False)
    for row, name in enumerate(names):
        per_step, cumulative = axes[row]
        for mode, r in results[name].items():
            steps = range(1, len(r.step_times) + 1)
            per_step.plot(steps, r.step_times, marker=".", label=mode)
            total, acc = 0.0, []
            for t in r.step_times:
                total += t
                acc.append(total)
            cumulative.plot(steps, acc, label=mode)
        per_step.set_yscale("log")
        per_step.set_title(f"{name} on {device}: time per step (the first call includes tracing and setup)")
        per_step.set_xlabel("step")
        per_step.set_ylabel("ms")
        cumulative.set_title(f"{name}: cumulative time (where the trace cost is paid back)")
        cumulative.set_xlabel("steps")
        cumulative.set_ylabel("ms")
        for ax in (per_step, cumulative):
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--device", default="cuda" if encore.cuda.is_available() else "cpu")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--plot", metavar="FILE.png")
    parser.add_argument("--lstm", action="store_true")
    parser.add_argument("--lstm-units", type=int, default=64)
    parser.add_argument("--lstm-length", type=int, default=50)
    args = parser.parse_args()
    device = encore.Device(args.device)
    steps = args.steps
    print(f"encore compare_modes (Python) on {device} (flush denormals {'on' if encore.flush_denormal() else 'off'}, "
          f"tf32 {'on' if encore.allow_tf32() else 'off'}, cpu threads {encore.num_threads()}), "
          f"{steps} measured steps per mode\n")
    # Process start-up (thread pools, library initialization and code generation, first page
    # faults) belongs to no mode: one eager step of each model on another shape pays it, and
    # leaves no per-shape state behind for the modes (each clears it).
    warm_start = time.perf_counter()
    for model in models(args):
        batch_size, length, features = model.input
        Runner(replace(model, input=(batch_size // 2, length + 3, features)), "eager", device).call(0)
    warm_ms = (time.perf_counter() - warm_start) * 1e3

    rows, notes, results = [], [], {}
    for model in models(args):
        results[model.name] = {}
        runners = {}  # eager and traced, kept for the paired measurement
        for mode in MODES:
            runner = Runner(model, mode, device)
            results[model.name][mode] = measure(runner, steps if mode in ("eager", "traced") else max(steps // 2, 5))
            if mode in ("eager", "traced"):
                runners[mode] = runner
        # The fixed-shape medians come from eager and traced steps taken in turn.
        eager_ms, traced_ms = paired_medians(runners["eager"], runners["traced"], steps)
        results[model.name]["eager"].step_ms = eager_ms
        results[model.name]["traced"].step_ms = traced_ms
        for mode, r in results[model.name].items():
            fixed = mode in ("eager", "traced")
            rows.append({
                "model": model.name,
                "mode": mode,
                "device": str(device),
                "first_call_ms": r.first_ms,
                "step_ms_median": r.step_ms,
                "traces": r.traces,
                "trace_ms_total": r.trace_ms,
                "trace_ms_each": r.trace_ms / r.traces if r.traces else 0.0,
                "capture_ms_total": r.capture_ms,
                "autotune_ms": r.autotune_ms,
                "kernel_ms_per_step": r.kernel_ms if fixed else math.nan,
                "overhead_ms_per_step": r.overhead_ms if fixed else math.nan,
                "speedup_vs_eager": eager_ms / r.step_ms,
            })
            if mode == "eager":
                notes.append(f"{model.name}: eager dispatches {r.ops_per_step} ops per step")
            if mode == "traced_new_length":
                notes.append(f"{model.name} retrace reason: {r.last_reason}")
    print_table(rows)
    print()
    for n in notes:
        print(n)
    print(f"process warm-up before the first mode (not in any row): {warm_ms:.1f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in rows],
                      f, indent=2)
        print(f"wrote {args.json}")
    if args.plot:
        plot(args.plot, results, device)


if __name__ == "__main__":
    main()
