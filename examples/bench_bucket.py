#!/usr/bin/env python3
"""Bucketed BiLSTM training against exact tracing and eager, at lengths drawn uniformly.

  Bidirectional(LSTM(16)) -> Dense(1, sigmoid); Adam(1e-3) + binary cross-entropy on
  (8, L, 8), L uniform in [40, 400]; buckets 130/220/310/400 (axis 1 of x).

Three copies of the model train on the same batches, a step of each in turn: eager, traced
with the exact policy (a new length retraces) and traced with the bucket policy (the true
length is an input of the graph: one trace per bucket). Prints, per mode, the traces, the
retraces bucketing saved, the padding (zeros added against real elements), the median and
mean step (the mean includes the steps that traced) and the largest parameter difference
from eager after the run. A benchmark, not a test.

  python examples/bench_bucket.py [--steps 60] [--batch 8] [--units 16] [--seed 0]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import encore
from encore import nn, optim


def model_of(units: int) -> nn.Sequential:
    encore.manual_seed(0)
    model = nn.Sequential([nn.Bidirectional(nn.LSTM(units)), nn.Dense(1, activation="sigmoid")])
    model.build((8, 40, 8))
    return model


def step_of(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = nn.binary_crossentropy(y, model(x))
        loss.backward()
        opt.step()
        return loss
    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--units", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    lengths = [int(n) for n in rng.integers(40, 401, size=args.steps)]
    models = {mode: model_of(args.units) for mode in ("eager", "exact", "bucket")}
    steps = {mode: step_of(m, optim.Adam(m.parameters(), lr=1e-3)) for mode, m in models.items()}
    steps["exact"] = encore.trace(steps["exact"], retrace_warning=0, max_cached=args.steps)
    steps["bucket"] = encore.trace(steps["bucket"], shapes=encore.bucket(1, [130, 220, 310, 400]))
    times = {mode: [] for mode in steps}
    for n in lengths:
        x = encore.tensor(rng.standard_normal((args.batch, n, 8)).astype(np.float32))
        y = encore.tensor((rng.random((args.batch, 1)) > 0.5).astype(np.float32))
        for mode, step in steps.items():
            start = time.perf_counter()
            step(x, y).item()
            times[mode].append((time.perf_counter() - start) * 1e3)

    print(f"BiLSTM({args.units}) training, batch {args.batch}, {args.steps} steps at lengths uniform in 40-400 "
          f"({len(set(lengths))} distinct), buckets 130/220/310/400; times in ms per step")
    print(f"{'mode':8} {'traces':>6} {'saved':>6} {'padding':>8} {'median':>9} {'mean':>9} {'max_param_diff':>15}")
    reference = models["eager"].parameters()
    for mode, t in times.items():
        stats = steps[mode].stats if mode != "eager" else {}
        padding = (f"{100.0 * stats['padding_elements'] / stats['real_elements']:.0f}%"
                   if stats.get("real_elements") else "-")
        diff = max(float(np.abs(p.numpy() - q.numpy()).max()) for p, q in zip(models[mode].parameters(), reference))
        print(f"{mode:8} {stats.get('traces', 0):>6} {stats.get('retraces_saved', 0):>6} {padding:>8} "
              f"{statistics.median(t):>9.2f} {statistics.mean(t):>9.2f} {diff:>15.2e}")


if __name__ == "__main__":
    main()
