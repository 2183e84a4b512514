#!/usr/bin/env python3
"""The demo from Python: encore.compare_modes on the models where eager execution, traced
replay, retracing and bucketing differ instructively (the C++ twin is
examples/compare_modes.cpp). A thin caller: the measurements, the table, the JSON and the plot
come from the library call, which measures your own model the same way (see also
``python -m encore.compare your_script.py``).

  models   small       Conv1D(128, 40, strides 4, same) -> GAP -> Dropout -> Dense(64) -> Dense(1)
                       batch (32, 140, 30): kernel-dominated
           tiny_dense  Dense(32, relu) per step -> GAP -> Dense(1), batch (32, 4, 8):
                       overhead-dominated
           per_step    Conv1D(16, 5, causal, relu) -> Dense(1) per step, a loss on the first
                       steps, batch (32, 40, 8): a model bucketing serves exactly
           lstm        Bidirectional(LSTM(units)) -> Dense(1) on (32, length, 16) (--lstm)
  modes    eager, traced, eager_new_length, traced_new_length, bucket (the layers mask with
           the true length; refused, with the reason, where the step cannot be made exact)

  python examples/compare_modes.py [--steps 30] [--device cpu|cuda] [--json out.json]
                                   [--plot modes.png] [--only MODEL]
                                   [--lstm [--lstm-units N --lstm-length N]]
"""

from __future__ import annotations

import argparse
import json

import encore
from encore import nn, optim


def models(args):
    def bce(y, p):
        return nn.binary_crossentropy(y, p)

    def first_steps_bce(y, p):
        return nn.binary_crossentropy(y, p[:, 0:8, :].reshape(p.shape[0], 8))

    m = [
        ("small", (32, 140, 30), lambda: nn.Sequential([
            nn.Conv1D(128, 40, strides=4, padding="same"), nn.GlobalAveragePooling1D(), nn.Dropout(0.5),
            nn.Dense(64, activation="relu"), nn.Dense(1, activation="sigmoid")]), [160, 192, 224], bce),
        ("tiny_dense", (32, 4, 8), lambda: nn.Sequential([
            nn.Dense(32, activation="relu"), nn.GlobalAveragePooling1D(),
            nn.Dense(1, activation="sigmoid")]), [16, 32, 64], bce),
        ("per_step", (32, 40, 8), lambda: nn.Sequential([
            nn.Conv1D(16, 5, padding="causal", activation="relu"),
            nn.Dense(1, activation="sigmoid")]), [48, 64, 96], first_steps_bce),
    ]
    if args.lstm:
        units, length = args.lstm_units, args.lstm_length
        m.append(("lstm", (32, length, 16), lambda: nn.Sequential([
            nn.Bidirectional(nn.LSTM(units)), nn.Dense(1, activation="sigmoid")]),
            [length + 16, length + 32, length + 64], bce))
    if args.only:
        m = [x for x in m if x[0] == args.only]
        if not m:
            raise SystemExit(f"compare_modes.py: error: --only: no model named {args.only!r}")
    return m


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--device", default="cuda" if encore.cuda.is_available() else "cpu")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--plot", metavar="FILE.png", help="one PNG per model: FILE-<model>.png")
    parser.add_argument("--only", metavar="MODEL")
    parser.add_argument("--lstm", action="store_true")
    parser.add_argument("--lstm-units", type=int, default=64)
    parser.add_argument("--lstm-length", type=int, default=50)
    args = parser.parse_args()  # unknown options are errors (exit status 2)
    if args.device.startswith("cuda") and not encore.cuda.is_available():
        parser.error(f"--device {args.device}: no CUDA device is available; use --device cpu")
    if args.plot:
        try:
            import matplotlib  # noqa: F401  (report.plot needs it: say so before the measurements)
        except ImportError:
            parser.error("--plot needs matplotlib: pip install matplotlib (or scripts/python_env.sh --plot)")
    device = encore.Device(args.device)
    print(f"encore compare_modes (Python) on {device}, cpu threads {encore.num_threads()}\n")
    reports = []
    for name, shape, build, buckets, loss in models(args):
        encore.manual_seed(0)
        model = build()
        model.build(shape)
        model.to(device)
        adam = optim.Adam(model.parameters(), lr=1e-3)
        labels = 8 if name == "per_step" else 1

        def make(length, n=shape[0], features=shape[2], labels=labels):
            x = encore.normal((n, length, features), generator=encore.Generator(length))
            y = (x[:, 0:labels, 0:1].reshape(n, labels) > 0.0)
            return x.to(device), y.to(device)

        report = encore.compare_modes(model=model, loss=loss, optimizer=adam, data=make, length=shape[1],
                                      modes=["eager", "traced", "eager_new_length", "traced_new_length", "bucket"],
                                      steps=args.steps, buckets=buckets, name=name)
        print(report.table())
        reports.append(report.to_dict())
        if args.plot:
            path = args.plot.removesuffix(".png") + f"-{name}.png"
            report.plot(path)
            print(f"wrote {path}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(reports, f, indent=2)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
