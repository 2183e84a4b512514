#!/usr/bin/env python3
"""The benchmark models of issue 12 trained in encore (eager and traced) and, when PyTorch
is installed, in PyTorch (eager and torch.compile): same initial weights, the same batches,
steps of all runners taken in turn (machine drift hits every runner alike) in an order that
rotates each round, 2 threads each by default. Prints per-model step medians, ratios to
encore traced and GFLOP/s as a percentage of the machine's SGEMM, measured by NumPy's matmul on
2048^3 in turn with the steps (encore's matmul beside it), and of the theoretical FMA peak from
the ISA and clock (encore.cpu_info()); the oneDNN implementation of each convolution direction
per model; --json writes the rows.

  models  tiny, small, medium, large, flatten, bilstm: the layers are in
          examples/puzzles/benchmark_models.py (Adam(1e-4), binary cross-entropy, batch 32,
          channels-last).

  python examples/bench_peers.py                      # tiny@4, small@140, medium@140: minutes
  python examples/bench_peers.py --runs small@1400,large@1400 --steps 5
  python examples/bench_peers.py --all                # every model of the issue's table (hours
                                                      # on 2 cores: bilstm and large take ~10-60 s
                                                      # a step per runner)
  options: --threads 2 --steps 10 --warmup 2 --no-torch --no-compile --no-jax --no-tf
           --json out.json

PyTorch, JAX and TensorFlow are no dependencies of encore: each runs where it is installed
(--no-torch, --no-jax, --no-tf leave them out; e.g. a venv with the PyPI wheels and encore on
PYTHONPATH). TensorFlow and PyTorch cannot share a process (both carry LLVM, whose options
clash): TensorFlow runs with --no-torch. JAX's step is one jax.jit of forward, gradients and
Adam; XLA's CPU pool has one thread per core (2 here: --threads does not reach it).
TensorFlow's is one tf.function of the Keras model's step, as a graph (tf_graph) and compiled by
XLA (tf_xla), 2 intra-op threads. PyTorch's models are written the way PyTorch runs them
fastest: channels-first convolutions on data transposed once outside the step, the LSTM with
one input GEMM and `unbind` over the steps.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

# Both OpenMP runtimes (encore's and PyTorch's own) read this when they load: spinning
# workers of one would steal the cores of the other between interleaved steps.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

import encore  # noqa: E402
from encore import nn, optim  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "puzzles"))
from benchmark_models import build_encore, features, layers_of, same_padding, step_flops  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # PyTorch is optional
    torch = None
try:
    import jax
    import jax.numpy as jnp
except ImportError:  # JAX is optional
    jax = None
tf = None  # TensorFlow, optional, is imported by main(): it cannot share a process with PyTorch

ALL_RUNS = ["tiny@4", "small@140", "small@1400", "small@14000", "medium@140", "medium@1400", "large@1400",
            "flatten@400", "bilstm@400"]
DEFAULT_RUNS = ["tiny@4", "small@140", "medium@140"]
# Steps timed together per sample, so that a sample is well above the timer's resolution.
CALLS_PER_SAMPLE = {"tiny": 200}


class EncoreRunner:
    def __init__(self, spec, shape, traced):
        encore.manual_seed(0)
        self.net = build_encore(spec)
        self.net.build(shape)
        adam = optim.Adam(self.net.parameters(), lr=1e-4)
        net = self.net

        def step(x, y):
            adam.zero_grad()
            loss = nn.binary_crossentropy(y, net(x))
            loss.backward()
            adam.step()
            return loss

        self.step = encore.trace(step, name="bench_peers") if traced else step

    def predict(self, x):
        with encore.training(False), encore.no_grad():
            return self.net(x).numpy()

    def weights(self):
        return {name: p.numpy().copy() for name, p in self.net.named_parameters()}

    def __call__(self, x, y):
        return float(self.step(x, y).item())


if torch is not None:

    class TorchLSTM(torch.nn.Module):
        """Keras' LSTM (gates i, f, c, o; `activation` on the cell input and output): one GEMM
        for every step's input projection, then per step one recurrent GEMM, over `unbind`."""

        def __init__(self, kernel, recurrent, bias, reverse=False):
            super().__init__()
            self.kernel = torch.nn.Parameter(torch.from_numpy(kernel))
            self.recurrent = torch.nn.Parameter(torch.from_numpy(recurrent))
            self.bias = torch.nn.Parameter(torch.from_numpy(bias))
            self.reverse = reverse

        def forward(self, x):  # (n, steps, features), channels-last like encore's
            proj = torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.kernel).view(x.shape[0], x.shape[1], -1)
            steps = list(proj.unbind(1))
            if self.reverse:
                steps.reverse()
            units = self.recurrent.shape[0]
            h = x.new_zeros(x.shape[0], units)
            c = x.new_zeros(x.shape[0], units)
            out = []
            for p in steps:
                i, f, g, o = (p + h @ self.recurrent).chunk(4, dim=1)
                c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.relu(g)
                h = torch.sigmoid(o) * torch.relu(c)
                out.append(h)
            if self.reverse:
                out.reverse()
            return torch.stack(out, 1)

    class TorchModel(torch.nn.Module):
        """The same layers as encore's model, initialized from its weights (name by name, in
        the order encore lists them)."""

        def __init__(self, spec, shape, weights):
            super().__init__()
            self.plan, self.mods = [], torch.nn.ModuleList()
            values = iter(weights.values())
            length, c = shape[1], shape[2]
            first_conv = True
            for layer in spec:
                kind = layer[0]
                if kind == "conv":
                    _, f, k, s, p = layer
                    m = torch.nn.Conv1d(c, f, k, stride=s)
                    m.weight.data = torch.from_numpy(next(values).transpose(2, 1, 0).copy())
                    m.bias.data = torch.from_numpy(next(values))
                    pad = same_padding(length, k, s) if p == "same" else (0, 0)
                    # Channels-first for the convolutions: the input is transposed once, outside
                    # the step, when the model starts with one.
                    self.plan.append(("conv", len(self.mods), pad, first_conv))
                    self.mods.append(m)
                    length = (length + pad[0] + pad[1] - k) // s + 1
                    c = f
                elif kind == "dense":
                    m = torch.nn.Linear(c, layer[1])
                    m.weight.data = torch.from_numpy(next(values).T.copy())
                    m.bias.data = torch.from_numpy(next(values))
                    self.plan.append(("dense", len(self.mods), layer[2]))
                    self.mods.append(m)
                    c = layer[1]
                elif kind in ("lstm", "bilstm"):
                    dirs = [False, True] if kind == "bilstm" else [False]
                    lstms = [TorchLSTM(next(values), next(values), next(values), r) for r in dirs]
                    self.plan.append(("lstm", len(self.mods), len(lstms)))
                    self.mods.extend(lstms)
                    c = layer[1] * len(dirs)
                else:
                    self.plan.append((kind,))
                    if kind == "flatten":
                        c, length = c * length, 1
                first_conv = False
            self.channels_first = spec[0][0] == "conv"

        def forward(self, x):
            cf = self.channels_first  # x is (n, c, l) while cf
            for p in self.plan:
                kind = p[0]
                if kind == "conv":
                    if not cf:
                        x, cf = x.transpose(1, 2), True
                    if p[2] != (0, 0):
                        x = F.pad(x, p[2])
                    x = self.mods[p[1]](x)
                elif kind == "lstm":
                    outs = [self.mods[p[1] + d](x) for d in range(p[2])]
                    x = outs[0] if len(outs) == 1 else torch.cat(outs, 2)
                elif kind == "gap":
                    x = x.mean(2 if cf else 1)
                    cf = False
                elif kind == "flatten":
                    x = (x.transpose(1, 2) if cf else x).flatten(1)
                    cf = False
                elif kind == "dropout":
                    x = F.dropout(x, 0.5, self.training)
                elif kind == "dense":
                    x = self.mods[p[1]](x)
                    act = p[2]
                    x = torch.relu(x) if act == "relu" else torch.sigmoid(x) if act == "sigmoid" else x
            return x

    class TorchRunner:
        def __init__(self, spec, shape, weights, compiled):
            model = TorchModel(spec, shape, weights)
            adam = torch.optim.Adam(model.parameters(), lr=1e-4, eps=1e-7)
            self.channels_first = model.channels_first

            def step(x, y):
                adam.zero_grad(set_to_none=True)
                loss = F.binary_cross_entropy(model(x), y)
                loss.backward()
                adam.step()
                return loss

            self.step = torch.compile(step) if compiled else step
            self.model = model

        def predict(self, x):
            self.model.eval()
            with torch.no_grad():
                out = self.model(x).numpy()
            self.model.train()
            return out

        def prepare(self, x, y):
            xt = torch.from_numpy(x)
            return (xt.transpose(1, 2).contiguous() if self.channels_first else xt), torch.from_numpy(y)

        def __call__(self, x, y):
            return float(self.step(x, y).item())


class JaxRunner:
    """The same model in JAX, one `jax.jit` of the whole step (forward, gradients and Adam, the
    parameters donated), channels-last like encore's: convolutions in NWC/WIO, the LSTM a
    `lax.scan` over the steps with one input GEMM before it."""

    def __init__(self, spec, shape, weights):
        values = iter(weights.values())
        self.params, plan = [], []
        length = shape[1]
        for layer in spec:
            kind = layer[0]
            if kind == "conv":
                _, f, k, s, p = layer
                pad = same_padding(length, k, s) if p == "same" else (0, 0)
                plan.append(("conv", len(self.params), s, pad))
                self.params += [jnp.asarray(next(values)), jnp.asarray(next(values))]
                length = (length + pad[0] + pad[1] - k) // s + 1
            elif kind == "dense":
                plan.append(("dense", len(self.params), layer[2]))
                self.params += [jnp.asarray(next(values)), jnp.asarray(next(values))]
            elif kind in ("lstm", "bilstm"):
                dirs = (False, True) if kind == "bilstm" else (False,)
                plan.append(("lstm", len(self.params), dirs))
                for _ in dirs:
                    self.params += [jnp.asarray(next(values)) for _ in range(3)]
            else:
                plan.append((kind,))
                if kind == "flatten":
                    length = 1
        lax = jax.lax

        def lstm(x, w, r, b, reverse):
            proj = jnp.einsum("ntc,cg->tng", x, w) + b
            units = r.shape[0]

            def cell(carry, p):
                h, c = carry
                i, f, g, o = jnp.split(p + h @ r, 4, axis=1)
                c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jax.nn.relu(g)
                h = jax.nn.sigmoid(o) * jax.nn.relu(c)
                return (h, c), h

            zero = jnp.zeros((x.shape[0], units), x.dtype)
            _, hs = lax.scan(cell, (zero, zero), proj, reverse=reverse)
            return jnp.swapaxes(hs, 0, 1)

        def forward(params, x, key, training):
            for p in plan:
                kind = p[0]
                if kind == "conv":
                    w, b = params[p[1]], params[p[1] + 1]
                    x = lax.conv_general_dilated(x, w, (p[2],), [p[3]], dimension_numbers=("NWC", "WIO", "NWC")) + b
                elif kind == "dense":
                    x = x @ params[p[1]] + params[p[1] + 1]
                    x = jax.nn.relu(x) if p[2] == "relu" else jax.nn.sigmoid(x) if p[2] == "sigmoid" else x
                elif kind == "lstm":
                    outs = [lstm(x, *params[p[1] + 3 * d:p[1] + 3 * d + 3], rev) for d, rev in enumerate(p[2])]
                    x = outs[0] if len(outs) == 1 else jnp.concatenate(outs, 2)
                elif kind == "gap":
                    x = x.mean(1)
                elif kind == "flatten":
                    x = x.reshape(x.shape[0], -1)
                elif kind == "dropout" and training:
                    keep = jax.random.bernoulli(key, 0.5, x.shape)
                    x = jnp.where(keep, x * 2.0, 0.0)
            return x

        def loss_fn(params, x, y, key):
            p = jnp.clip(forward(params, x, key, True), 1e-7, 1 - 1e-7)
            return -jnp.mean(y * jnp.log(p) + (1 - y) * jnp.log(1 - p))

        def step(params, m, v, t, key, x, y):
            key, sub = jax.random.split(key)
            loss, grads = jax.value_and_grad(loss_fn)(params, x, y, sub)
            t = t + 1
            lr = 1e-4 * jnp.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
            m = [0.9 * a + 0.1 * g for a, g in zip(m, grads)]
            v = [0.999 * a + 0.001 * g * g for a, g in zip(v, grads)]
            params = [p - lr * a / (jnp.sqrt(b) + 1e-7) for p, a, b in zip(params, m, v)]
            return params, m, v, t, key, loss

        self.step_fn = jax.jit(step, donate_argnums=(0, 1, 2))
        self.predict_fn = jax.jit(lambda params, x: forward(params, x, None, False))
        self.m = [jnp.zeros_like(p) for p in self.params]
        self.v = [jnp.zeros_like(p) for p in self.params]
        self.t = jnp.zeros((), jnp.float32)
        self.key = jax.random.PRNGKey(0)

    def predict(self, x):
        return np.asarray(self.predict_fn(self.params, x))

    def prepare(self, x, y):
        return jnp.asarray(x), jnp.asarray(y)

    def __call__(self, x, y):
        self.params, self.m, self.v, self.t, self.key, loss = self.step_fn(
            self.params, self.m, self.v, self.t, self.key, x, y)
        return float(loss)


class TfRunner:
    """The same model in Keras on TensorFlow, channels-last like encore's, the whole step (forward,
    gradients, Adam) one `tf.function`: a TF graph, or with `jit_compile` one XLA program."""

    def __init__(self, spec, shape, weights, xla):
        keras = tf.keras
        values = iter(weights.values())
        layers, sets = [keras.Input(shape[1:])], []
        for layer in spec:
            kind = layer[0]
            if kind == "conv":
                _, f, k, s, p = layer
                layers.append(keras.layers.Conv1D(f, k, strides=s, padding=p))
                sets.append((layers[-1], 2))
            elif kind == "dense":
                layers.append(keras.layers.Dense(layer[1], activation=layer[2]))
                sets.append((layers[-1], 2))
            elif kind in ("lstm", "bilstm"):
                lstm = keras.layers.LSTM(layer[1], activation="relu", return_sequences=True)
                layers.append(keras.layers.Bidirectional(lstm) if kind == "bilstm" else lstm)
                sets.append((layers[-1], 6 if kind == "bilstm" else 3))
            elif kind == "gap":
                layers.append(keras.layers.GlobalAveragePooling1D())
            elif kind == "flatten":
                layers.append(keras.layers.Flatten())
            elif kind == "dropout":
                layers.append(keras.layers.Dropout(0.5))
        model = keras.Sequential(layers)
        for layer, n in sets:
            layer.set_weights([next(values) for _ in range(n)])
        opt = keras.optimizers.Adam(1e-4, epsilon=1e-7)
        bce = keras.losses.BinaryCrossentropy()

        @tf.function(jit_compile=xla)
        def step(x, y):
            with tf.GradientTape() as tape:
                loss = bce(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        self.model, self.step = model, step

    def predict(self, x):
        return self.model(x, training=False).numpy()

    def prepare(self, x, y):
        return tf.constant(x), tf.constant(y)

    def __call__(self, x, y):
        return float(self.step(x, y))


class Sgemm:
    """The machine's SGEMM measured by an implementation encore did not produce: NumPy's matmul
    (its own OpenBLAS) on 2048^3 float32, timed in turn with the steps so that it sees the same
    machine they do. encore's matmul on the same operands is timed beside it."""

    n = 2048

    def __init__(self, ours=False):
        rng = np.random.default_rng(1)
        a, b = (rng.standard_normal((self.n, self.n)).astype(np.float32) for _ in range(2))
        if ours:
            self.a, self.b = encore.from_numpy(a), encore.from_numpy(b)
            self.f = encore.matmul
        else:
            self.a, self.b, self.out = a, b, np.empty_like(a)
            self.f = lambda x, y: np.matmul(x, y, out=self.out)

    def __call__(self):
        self.f(self.a, self.b)

    @classmethod
    def gflops(cls, ms):
        return 2 * cls.n ** 3 / ms / 1e6


def fma_peak(threads):
    """The theoretical float32 FMA peak of `threads` cores (encore.cpu_info: ISA, clock)."""
    c = encore.cpu_info()
    return c["ghz"] * c["flops_per_cycle"] * threads, c


def bench(run, args):
    model, length = run.split("@")
    try:
        spec = layers_of(model)
    except ValueError as e:
        raise SystemExit(f"bench_peers.py: error: {e}") from None
    shape = (args.batch, int(length), features(model))
    rng = np.random.default_rng(0)
    batches = [(rng.standard_normal(shape).astype(np.float32),
                (rng.random((shape[0], 1)) > 0.5).astype(np.float32)) for _ in range(2)]
    seen = {(e["op"], e["key"]) for e in encore.autotune.entries()}
    runners = {"encore_eager": EncoreRunner(spec, shape, False),
               "encore_traced": EncoreRunner(spec, shape, True)}
    feeds = {name: [(encore.from_numpy(x), encore.from_numpy(y)) for x, y in batches] for name in runners}
    if torch is not None and not args.no_torch:
        w = runners["encore_eager"].weights()
        modes = [("torch_eager", False)] + ([] if args.no_compile else [("torch_compile", True)])
        for name, compiled in modes:
            r = TorchRunner(spec, shape, w, compiled)
            runners[name] = r
            feeds[name] = [r.prepare(x, y) for x, y in batches]
        # Same weights, same model: the predictions before training agree.
        ours = runners["encore_eager"].predict(feeds["encore_eager"][0][0])
        theirs = runners["torch_eager"].predict(feeds["torch_eager"][0][0])
        if not np.allclose(ours, theirs, rtol=1e-3, atol=1e-5):
            raise SystemExit(f"{run}: PyTorch's model differs from encore's (max difference "
                             f"{np.abs(ours - theirs).max():.3g}): not the same weights or layers")
    if jax is not None and not args.no_jax:
        r = JaxRunner(spec, shape, runners["encore_eager"].weights())
        runners["jax_jit"], feeds["jax_jit"] = r, [r.prepare(x, y) for x, y in batches]
        ours = runners["encore_eager"].predict(feeds["encore_eager"][0][0])
        theirs = r.predict(feeds["jax_jit"][0][0])
        if not np.allclose(ours, theirs, rtol=1e-3, atol=1e-5):
            raise SystemExit(f"{run}: JAX's model differs from encore's (max difference "
                             f"{np.abs(ours - theirs).max():.3g})")
    if tf is not None:
        for name, xla in (("tf_graph", False), ("tf_xla", True)):
            r = TfRunner(spec, shape, runners["encore_eager"].weights(), xla)
            runners[name], feeds[name] = r, [r.prepare(x, y) for x, y in batches]
        ours = runners["encore_eager"].predict(feeds["encore_eager"][0][0])
        theirs = runners["tf_graph"].predict(feeds["tf_graph"][0][0])
        if not np.allclose(ours, theirs, rtol=1e-3, atol=1e-5):
            raise SystemExit(f"{run}: TensorFlow's model differs from encore's (max difference "
                             f"{np.abs(ours - theirs).max():.3g})")
    runners["sgemm"], feeds["sgemm"] = Sgemm(), [(), ()]
    runners["encore_sgemm"], feeds["encore_sgemm"] = Sgemm(ours=True), [(), ()]
    times = {name: [] for name in runners}
    first = {}
    calls = CALLS_PER_SAMPLE.get(model, 1)
    models = [name for name in runners if not name.endswith("sgemm")]
    for i in range(args.warmup + args.steps):
        # The runner right after the SGEMM meets caches it flushed: the order rotates each
        # round so that no runner always comes first.
        k = i % len(models)
        for name in models[k:] + models[:k] + ["sgemm", "encore_sgemm"]:
            r = runners[name]
            n = 1 if name.endswith("sgemm") or i == 0 else calls
            t0 = time.perf_counter()
            for _ in range(n):
                r(*feeds[name][i % 2])
            dt = (time.perf_counter() - t0) * 1e3 / n
            if i == 0:
                first[name] = dt
            if i >= args.warmup:
                times[name].append(dt)
    flops = step_flops(spec, shape)
    med = {name: statistics.median(t) for name, t in times.items()}
    peak = Sgemm.gflops(med.pop("sgemm"))
    ours = Sgemm.gflops(med.pop("encore_sgemm"))
    fma, _ = fma_peak(args.threads)
    rows = []
    for name, ms in med.items():
        rows.append({"model": model, "input": "x".join(map(str, shape)), "runner": name,
                     "step_ms": round(ms, 3), "first_ms": round(first[name], 1),
                     "vs_encore_traced": round(ms / med["encore_traced"], 3),
                     "gflops": round(flops / ms / 1e6, 1), "numpy_sgemm_gflops": round(peak, 1),
                     "pct_of_numpy_sgemm": round(100 * flops / ms / 1e6 / peak, 1),
                     "pct_of_fma_peak": round(100 * flops / ms / 1e6 / fma, 1) if fma else None,
                     "encore_sgemm_gflops": round(ours, 1),
                     "load1": round(os.getloadavg()[0], 1)})
    return rows, implementations(seen)


def implementations(seen):
    """The oneDNN implementation each convolution direction of the model runs (the autotune
    cache's choices its steps made, those in `seen` before it excluded), e.g.
    {"conv1d_backward_filter": ["gemm:jit"]}."""
    picked = {}
    for e in encore.autotune.entries():
        if e["backend"] == "onednn" and (e["op"], e["key"]) not in seen:
            names = picked.setdefault(e["op"], [])
            if e["algorithm"] not in names:
                names.append(e["algorithm"])
    return picked


def load_tensorflow():
    global tf
    try:
        import tensorflow
    except ImportError:  # TensorFlow is optional
        return
    tf = tensorflow


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", help="comma-separated model@length (default %s)" % ",".join(DEFAULT_RUNS))
    parser.add_argument("--all", action="store_true", help="every run of the issue's table")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile (slow to compile)")
    parser.add_argument("--no-jax", action="store_true", help="skip JAX even where it is installed")
    parser.add_argument("--no-tf", action="store_true", help="skip TensorFlow even where it is installed")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    runs = ALL_RUNS if args.all else (args.runs.split(",") if args.runs else DEFAULT_RUNS)
    encore.set_num_threads(args.threads)
    if torch is not None:
        torch.set_num_threads(args.threads)
    peers = "none (PyTorch not installed)" if torch is None else f"PyTorch {torch.__version__}"
    if args.no_torch:
        peers = "none (--no-torch)"
    if jax is not None and not args.no_jax:
        peers += f", JAX {jax.__version__}"
    if not args.no_tf and (torch is None or args.no_torch):
        load_tensorflow()
    elif not args.no_tf:
        print("# TensorFlow left out: it and PyTorch both carry LLVM, whose options clash in one "
              "process; --no-torch runs it")
    if tf is not None:
        # Before TensorFlow's first op: its pools are made once.
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        peers += f", TensorFlow {tf.__version__}"
    print(f"# encore {encore.__version__}, threads {encore.num_threads()}, peers: {peers}, "
          f"{args.steps} steps after {args.warmup} warm-up, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}, load average "
          + " ".join(f"{v:.1f}" for v in os.getloadavg()))
    rows = []
    fma, cpu = fma_peak(args.threads)
    print(f"# CPU {cpu['model']} ({cpu['isa']}): theoretical float32 FMA peak of {args.threads} "
          f"cores {fma:.0f} GFLOP/s ({cpu['peak_basis']} at {cpu['ghz']:.2f} GHz: measured "
          f"{cpu['measured_ghz']:.2f}, /proc/cpuinfo {cpu['nominal_ghz']:.2f}); NumPy {np.__version__}")
    impls = {}
    for run in runs:
        model_rows, impls[run] = bench(run, args)
        for r in model_rows:
            rows.append(r)
            print("  ".join(f"{k}={v}" for k, v in r.items()), flush=True)
        for op, names in impls[run].items():
            print(f"  {run} {op}: {', '.join(names)}", flush=True)
    cols = list(rows[0].keys())
    print("\n| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": encore.num_threads(), "peers": peers, "cpu": cpu,
                       "fma_peak_gflops": fma, "rows": rows, "implementations": impls}, f, indent=1)


if __name__ == "__main__":
    main()
