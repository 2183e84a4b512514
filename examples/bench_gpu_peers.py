#!/usr/bin/env python3
"""The small Conv1D model and the tiny Dense model trained on one GPU in encore (eager, and
traced: one CUDA Graph launch a step) and in PyTorch (eager, and one training step captured
with torch.cuda.graph and replayed), from the same weights on the same batches, TF32 off on
both sides (issue 27's peer). Each runner's steps are timed with CUDA events on the stream it
queues on (encore's through torch.cuda.ExternalStream(encore.cuda.stream())), in samples of
several steps, the runners taking turns sample by sample after a warm-up; it prints each
runner's median time per step, the ratios, and the largest difference between the two
models' predictions (the weights really are the same); --json writes it all.

  models  tiny, small (examples/puzzles/benchmark_models.py): Adam(1e-4), binary
          cross-entropy, batch 32, channels-last; MODEL@LENGTH picks the steps of a sample.

  python examples/bench_gpu_peers.py                       # tiny@4, small@140, small@1400
  python examples/bench_gpu_peers.py --runs small@1400 --samples 30 --json peers.json
  python examples/bench_gpu_peers.py --device cpu          # the same on the CPU (no graphs;
                                                           # a check of the script where no GPU is)
  options: --samples 20 --warmup 5 --steps-per-sample (default: 20 tiny, 5 others)
           --no-torch (encore alone)

PyTorch is no dependency of encore: where it is missing, encore's runners run alone (and the
timing uses encore.cuda.synchronize and the host clock); on the CPU PyTorch runs eagerly only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

import encore
from encore import nn, optim

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "puzzles"))
from benchmark_models import build_encore, features, layers_of, same_padding  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # PyTorch is optional
    torch = None

MODELS = ("tiny", "small")
DEFAULT_RUNS = ["tiny@4", "small@140", "small@1400"]
BATCH = 32
BATCHES = 4  # distinct batches, used in turn


def parse_runs(text):
    runs = []
    for item in text.split(","):
        model, _, length = item.partition("@")
        if model not in MODELS or not length.isdigit():
            raise SystemExit(f"--runs: {item!r} is not MODEL@LENGTH with MODEL one of {', '.join(MODELS)}")
        runs.append((model, int(length)))
    return runs


# ---- encore ------------------------------------------------------------------------------

class EncoreRunner:
    def __init__(self, spec, shape, device, traced):
        encore.manual_seed(0)
        self.net = build_encore(spec)
        self.net.build(shape)
        self.net.to(device)
        adam = optim.Adam(self.net.parameters(), lr=1e-4)
        net = self.net

        def step(x, y):
            adam.zero_grad()
            loss = nn.binary_crossentropy(y, net(x))
            loss.backward()
            adam.step()
            return loss

        self.step = encore.trace(step, name="bench_gpu_peers") if traced else step

    def weights(self):
        return [p.numpy() for p in self.net.parameters()]

    def prepare(self, x, y, device):
        return encore.tensor(x, device=device), encore.tensor(y, device=device)

    def predict(self, x):
        with encore.training(False), encore.no_grad():
            return self.net(x).numpy()

    def __call__(self, x, y):
        return self.step(x, y)


# ---- PyTorch -----------------------------------------------------------------------------

if torch is not None:

    class TorchModel(torch.nn.Module):
        """The tiny and small models' layers (Conv1D, GAP, Dropout, Dense), from encore's weights
        in the order encore lists them; convolutions channels-first on data transposed once,
        outside the step."""

        def __init__(self, spec, shape, weights):
            super().__init__()
            values = iter(weights)
            self.plan, self.mods = [], torch.nn.ModuleList()
            length, c = shape[1], shape[2]
            for layer in spec:
                kind = layer[0]
                if kind == "conv":
                    _, f, k, s, p = layer
                    m = torch.nn.Conv1d(c, f, k, stride=s)
                    m.weight.data = torch.from_numpy(next(values).transpose(2, 1, 0).copy())
                    m.bias.data = torch.from_numpy(next(values).copy())
                    pad = same_padding(length, k, s) if p == "same" else (0, 0)
                    self.plan.append(("conv", len(self.mods), pad))
                    self.mods.append(m)
                    length, c = (length + pad[0] + pad[1] - k) // s + 1, f
                elif kind == "dense":
                    m = torch.nn.Linear(c, layer[1])
                    m.weight.data = torch.from_numpy(next(values).T.copy())
                    m.bias.data = torch.from_numpy(next(values).copy())
                    self.plan.append(("dense", len(self.mods), layer[2]))
                    self.mods.append(m)
                    c = layer[1]
                else:
                    self.plan.append((kind,))
            self.channels_first = spec[0][0] == "conv"

        def forward(self, x):
            cf = self.channels_first  # x is (n, c, l) while cf
            for p in self.plan:
                if p[0] == "conv":
                    x = self.mods[p[1]](F.pad(x, p[2]) if p[2] != (0, 0) else x)
                elif p[0] == "gap":
                    x, cf = x.mean(2 if cf else 1), False
                elif p[0] == "dropout":
                    x = F.dropout(x, 0.5, self.training)
                elif p[0] == "dense":
                    x = self.mods[p[1]](x)
                    x = torch.relu(x) if p[2] == "relu" else torch.sigmoid(x) if p[2] == "sigmoid" else x
            return x

    class TorchRunner:
        """PyTorch eager, or (graph=True) one training step captured with torch.cuda.graph on
        static inputs, replayed after copying each batch in (Adam capturable, as the docs'
        whole-network capture does)."""

        def __init__(self, spec, shape, weights, device, graph):
            self.device = torch.device(device)
            self.model = TorchModel(spec, shape, weights).to(self.device)
            adam = torch.optim.Adam(self.model.parameters(), lr=1e-4, eps=1e-7, capturable=graph)
            model = self.model

            def step(x, y):
                adam.zero_grad(set_to_none=not graph)
                loss = F.binary_cross_entropy(model(x), y)
                loss.backward()
                adam.step()
                return loss

            self.eager_step, self.graph = step, None
            self.wants_graph = graph

        def prepare(self, x, y, device):
            xt = torch.from_numpy(x)
            xt = xt.transpose(1, 2).contiguous() if self.model.channels_first else xt
            return xt.to(self.device), torch.from_numpy(y).to(self.device)

        def capture(self, x, y):
            """Warm-up on a side stream, then the capture (torch.cuda.graph's recipe)."""
            self.static_x, self.static_y = x.clone(), y.clone()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    self.eager_step(self.static_x, self.static_y)
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.static_loss = self.eager_step(self.static_x, self.static_y)

        def predict(self, x):
            self.model.eval()
            with torch.no_grad():
                out = self.model(x).cpu().numpy()
            self.model.train()
            return out

        def __call__(self, x, y):
            if not self.wants_graph:
                return self.eager_step(x, y)
            if self.graph is None:
                self.capture(x, y)
            self.static_x.copy_(x)
            self.static_y.copy_(y)
            self.graph.replay()
            return self.static_loss


# ---- timing ------------------------------------------------------------------------------

class Timer:
    """Times a block of steps: CUDA events on the stream the runner queues on, where PyTorch
    can give them; else the host clock after a synchronization."""

    def __init__(self, device, stream_of):
        self.cuda = device.startswith("cuda")
        self.events = self.cuda and torch is not None and torch.cuda.is_available()
        self.stream = stream_of() if self.events else None

    def measure(self, run):
        if self.events:
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(self.stream)
            run()
            stop.record(self.stream)
            stop.synchronize()
            return start.elapsed_time(stop) / 1e3
        t0 = time.perf_counter()
        run()
        if self.cuda:
            encore.cuda.synchronize()
        return time.perf_counter() - t0


def make_runners(spec, shape, device, use_torch):
    """name -> (runner, timer). Every runner starts from encore's initial weights."""
    cuda = device.startswith("cuda")
    runners = {}
    for traced in (False, True):
        r = EncoreRunner(spec, shape, device, traced)
        stream = (lambda: torch.cuda.ExternalStream(encore.cuda.stream(device))) if torch is not None else None
        runners["encore_traced" if traced else "encore_eager"] = (r, Timer(device, stream))
    weights = runners["encore_eager"][0].weights()
    if use_torch and torch is not None:
        for graph in ((False, True) if cuda else (False,)):
            r = TorchRunner(spec, shape, weights, device, graph)
            timer = Timer(device, torch.cuda.current_stream if cuda else None)
            runners["torch_graph" if graph else "torch_eager"] = (r, timer)
    return runners


def bench(model, length, device, args):
    spec = layers_of(model)
    shape = (BATCH, length, features(model))
    rng = np.random.default_rng(0)
    data = [(rng.standard_normal(shape).astype(np.float32), rng.integers(0, 2, (BATCH, 1)).astype(np.float32))
            for _ in range(BATCHES)]
    runners = make_runners(spec, shape, device, not args.no_torch)
    batches = {name: [r.prepare(x, y, device) for x, y in data] for name, (r, _) in runners.items()}
    # The same weights: predictions before any step agree (float32 on both sides, TF32 off).
    ref = runners["encore_eager"][0].predict(batches["encore_eager"][0][0])
    agreement = {name: float(np.abs(r.predict(batches[name][0][0]) - ref).max())
                 for name, (r, _) in runners.items() if name != "encore_eager"}
    per_sample = args.steps_per_sample or (20 if model == "tiny" else 5)
    times = {name: [] for name in runners}
    count = [0]

    def steps(name):
        r = runners[name][0]
        for _ in range(per_sample):
            x, y = batches[name][count[0] % BATCHES]
            count[0] += 1
            r(x, y)

    names = list(runners)
    for sample in range(args.warmup + args.samples):
        order = names[sample % len(names):] + names[:sample % len(names)]  # rotates each round
        for name in order:
            seconds = runners[name][1].measure(lambda: steps(name))
            if sample >= args.warmup:
                times[name].append(seconds / per_sample)
    result = {"model": model, "length": length, "device": device, "steps_per_sample": per_sample,
              "samples": args.samples, "prediction_max_abs_diff": agreement, "runners": {}}
    for name, t in times.items():
        q = statistics.quantiles(t, n=10) if len(t) > 1 else [t[0]] * 9
        result["runners"][name] = {"median_ms": statistics.median(t) * 1e3, "p10_ms": q[0] * 1e3,
                                   "p90_ms": q[-1] * 1e3}
    med = {name: r["median_ms"] for name, r in result["runners"].items()}
    ratios = {}
    for a, b in (("encore_traced", "torch_graph"), ("encore_eager", "torch_eager"),
                 ("encore_traced", "torch_eager"), ("encore_traced", "encore_eager")):
        if a in med and b in med:
            ratios[f"{a}/{b}"] = med[a] / med[b]
    result["ratios"] = ratios
    return result


def machine(device):
    info = {"device": device, "encore": encore.__version__, "torch": torch.__version__ if torch else None,
            "loadavg": open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else None}
    if device.startswith("cuda") and torch is not None and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default=",".join(DEFAULT_RUNS))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps-per-sample", type=int, default=0)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.samples < 1 or args.warmup < 0:
        raise SystemExit("--samples must be at least 1 and --warmup at least 0")
    if args.device.startswith("cuda") and not encore.cuda.is_available():
        raise SystemExit(f"no CUDA device: {encore.cuda.unavailable_reason()}")
    encore.set_allow_tf32(False)
    if torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.manual_seed(0)
    elif not args.no_torch:
        print("PyTorch is not installed: encore's runners only")
    results = [bench(model, length, args.device, args) for model, length in parse_runs(args.runs)]
    print(f"{'model':<12} {'runner':<14} {'ms/step':>9} {'p10':>8} {'p90':>8}  prediction diff")
    for r in results:
        for name, t in r["runners"].items():
            diff = r["prediction_max_abs_diff"].get(name)
            print(f"{r['model'] + '@' + str(r['length']):<12} {name:<14} {t['median_ms']:9.4f} {t['p10_ms']:8.4f} "
                  f"{t['p90_ms']:8.4f}  {'' if diff is None else f'{diff:.2e}'}")
        for k, v in r["ratios"].items():
            print(f"{'':<12} {k:<30} {v:6.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(args.device), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
