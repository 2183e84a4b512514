#!/usr/bin/env python3
"""What Module.fit and Module.predict cost against the loops they replace, in one table:

  fit_us/step      Module.fit in traced mode (progress bar off), per training step
  loop_us/step     a hand-written traced step (zero_grad, forward, loss, backward, Adam) called
                   from Python over the same batches
  predict_us/batch Module.predict (traced, batched)
  eager_us/batch   an eager forward pass per batch under no_grad, in inference mode

on the small Conv1D model (batch (32, 140, 30): kernel time dominates) and the tiny Dense model
(batch (32, 4, 8): framework overhead dominates). Every timing is the median of --repeats
rounds, the two sides of a comparison taken in turn within a round, after a warm-up (traces and
per-shape setup are not counted: fit's cost summary shows them).

  python examples/bench_fit.py [--repeats 7] [--epochs 3] [--device cpu|cuda] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import encore
from encore import nn, optim

MODELS = {
    "small": ((140, 30), 16, lambda: nn.Sequential([
        nn.Conv1D(128, 40, strides=4, padding="same"), nn.GlobalAveragePooling1D(), nn.Dropout(0.5),
        nn.Dense(64, activation="relu"), nn.Dense(1, activation="sigmoid")])),
    "tiny_dense": ((4, 8), 128, lambda: nn.Sequential([
        nn.Dense(32, activation="relu"), nn.GlobalAveragePooling1D(), nn.Dense(1, activation="sigmoid")])),
}
BATCH = 32


def sync(device):
    if device.type == "cuda":
        encore.cuda.synchronize(device)


def timed(fn, device) -> float:
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t0


def bench(name: str, args) -> dict:
    (steps, features), batches, build = MODELS[name]
    device = encore.Device(args.device)
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((batches * BATCH, steps, features)).astype(np.float32)
    y_np = (x_np[:, 0, :1] > 0).astype(np.float32)
    x, y = encore.tensor(x_np).to(device), encore.tensor(y_np).to(device)

    def make():
        encore.manual_seed(0)
        net = build()
        net.build((BATCH, steps, features))
        net.to(device)
        return net, optim.Adam(net.parameters(), lr=1e-3)

    fitted, adam = make()
    fitted.compile(adam, "binary_crossentropy")
    looped, loop_adam = make()

    @encore.trace
    def step(xb, yb):
        loop_adam.zero_grad()
        loss = nn.binary_crossentropy(yb, looped(xb))
        loss.backward()
        loop_adam.step()
        return loss

    # The batches fit takes without shuffling: views of the arrays.
    pairs = [(x[i:i + BATCH], y[i:i + BATCH]) for i in range(0, len(x), BATCH)]

    def fit():
        fitted.fit(x, y, batch_size=BATCH, epochs=args.epochs, shuffle=False, verbose=0)

    def loop():
        for _ in range(args.epochs):
            for xb, yb in pairs:
                step(xb, yb)

    def predict():
        fitted.predict(x, batch_size=BATCH)

    def eager():
        with encore.no_grad(), encore.training(False):
            for xb, _ in pairs:
                looped(xb)

    for warm in (fit, loop, predict, eager):
        warm()
    fit_s, loop_s, predict_s, eager_s = [], [], [], []
    for _ in range(args.repeats):
        fit_s.append(timed(fit, device))
        loop_s.append(timed(loop, device))
        predict_s.append(timed(predict, device))
        eager_s.append(timed(eager, device))
    n_steps = args.epochs * batches
    row = {
        "model": name,
        "device": str(device),
        "steps": n_steps,
        "fit_us/step": statistics.median(fit_s) / n_steps * 1e6,
        "loop_us/step": statistics.median(loop_s) / n_steps * 1e6,
        "predict_us/batch": statistics.median(predict_s) / batches * 1e6,
        "eager_us/batch": statistics.median(eager_s) / batches * 1e6,
    }
    row["fit/loop"] = row["fit_us/step"] / row["loop_us/step"]
    row["predict/eager"] = row["predict_us/batch"] / row["eager_us/batch"]
    traces = fitted.traced_steps["train"]["traces"]
    assert traces == 1, f"fit traced {traces} times"  # every batch has the same shape
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--device", default="cuda" if encore.cuda.is_available() else "cpu")
    p.add_argument("--models", default="small,tiny_dense")
    p.add_argument("--json")
    args = p.parse_args()
    rows = [bench(name, args) for name in args.models.split(",")]
    keys = list(rows[0])
    width = {k: max(len(k), *(len(f"{r[k]:.2f}" if isinstance(r[k], float) else str(r[k])) for r in rows))
             for k in keys}
    print("  ".join(k.ljust(width[k]) for k in keys))
    for r in rows:
        print("  ".join((f"{r[k]:.2f}" if isinstance(r[k], float) else str(r[k])).ljust(width[k]) for k in keys))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
