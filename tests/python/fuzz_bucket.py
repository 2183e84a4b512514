"""Differential fuzzer for bucketing (encore.bucket): random models and steps, called eagerly and
traced under a bucket policy over random lengths, must never differ silently.

A program is a plain dict: a model made of sequence layers (Conv1D valid/same/causal with strides
and dilations, LSTM, GRU, Bidirectional, Dense, Max/AveragePooling1D, Batch/LayerNormalization,
Activation, and Custom — a Python per-step layer, the pattern that bucketing cannot see through),
then a reader of the steps (the built-in GlobalAverage/GlobalMaxPooling1D or a last-state LSTM,
which mask; or Python code that reads across the steps: a mean, max, sum or softmax over them, the
last step, a count of the steps), a Dense head; and a step (predict, an SGD step with a loss over
the output, or a loss on the last step). The calls take random lengths from 0 to beyond the
largest bucket: shorter than a window (eager refuses them), 0, inside the buckets, above them.

For every call, run eagerly on one copy of the model and bucketed on another:
* eager raised: the bucketed call raises the same error type and message;
* eager returned: the bucketed call returns the same values (outputs trimmed back, parameters
  after the step, within float rounding), or refuses (a ValueError saying the bucket cannot be
  exact or cannot be probed): never other values;
* a program made only of layers and readers that mask (no Custom, no Python reader, no loss on
  the last step) is never refused.

    python tests/python/fuzz_bucket.py --programs 300 --seed 1
    python tests/python/fuzz_bucket.py --program 1:42        # print one program and run it
"""

from __future__ import annotations

import argparse
import random
import sys
import time

import numpy as np

import encore
import encore.nn as nn
import encore.optim as optim

READERS_THAT_MASK = ("GlobalAveragePooling1D", "GlobalMaxPooling1D", "LSTM", "none")
PYTHON_READERS = {
    "mean": "encore.mean(h, 1)",
    "max": "encore.max(h, 1)",
    "sum": "encore.sum(h, 1)",
    "softmax": "encore.softmax(h, 1)",
    "last": "h[:, -1]",
    "count": "encore.sum(h * 0.0 + 1.0, 1)",
}
REFUSED = ("cannot be exact", "cannot be probed")


class Generator:
    def __init__(self, seed: int):
        self.r = random.Random(seed)

    def program(self) -> dict:
        r = self.r
        layers = [self.layer() for _ in range(r.choice([1, 1, 2, 3]))]
        if r.random() < 0.25:
            layers.insert(r.randrange(len(layers) + 1), {"kind": "Custom"})
        reader = r.choice(list(READERS_THAT_MASK) + list(PYTHON_READERS))
        sizes = sorted(r.sample(range(4, 21), r.randint(1, 3)))
        step = r.choice(["predict", "train", "train", "train_last"])
        calls = [[r.randint(0, sizes[-1] + 4), r.randrange(1000)] for _ in range(r.randint(3, 8))]
        # Mostly lengths inside the buckets; sometimes very short ones (below a window, 0).
        for c in calls:
            if r.random() < 0.7:
                c[0] = r.randint(max(1, sizes[0] // 2), sizes[-1])
        return {"seed": r.randrange(1 << 16), "channels": r.randint(1, 3), "layers": layers, "reader": reader,
                "sizes": sizes, "step": step, "calls": calls}

    def layer(self) -> dict:
        r = self.r
        kind = r.choice(["Conv1D", "Conv1D", "LSTM", "GRU", "Bidirectional", "Dense", "Pooling", "BatchNormalization",
                         "LayerNormalization", "Activation"])
        if kind == "Conv1D":
            layer = {"kind": kind, "filters": r.randint(1, 3), "kernel_size": r.randint(1, 4),
                     "padding": r.choice(["valid", "same", "causal"]), "strides": 1, "dilation_rate": 1,
                     "activation": r.choice(["linear", "relu", "tanh"])}
            if r.random() < 0.4:
                layer[r.choice(["strides", "dilation_rate"])] = 2
            if layer["padding"] == "causal":
                layer["strides"] = 1
            return layer
        if kind in ("LSTM", "GRU"):
            backwards = "reverse" if kind == "LSTM" else "go_backwards"
            return {"kind": kind, "units": r.randint(1, 3), "return_sequences": True, backwards: r.random() < 0.2}
        if kind == "Bidirectional":
            return {"kind": kind, "cell": r.choice(["LSTM", "GRU"]), "units": r.randint(1, 3)}
        if kind == "Pooling":
            return {"kind": r.choice(["MaxPooling1D", "AveragePooling1D"]), "pool_size": r.randint(1, 3),
                    "strides": r.choice([None, 1, 2])}
        if kind == "Dense":
            return {"kind": kind, "units": r.randint(1, 3), "activation": r.choice(["linear", "relu", "tanh"])}
        if kind == "Activation":
            return {"kind": kind, "activation": r.choice(["relu", "tanh", "gelu"])}
        return {"kind": kind}


def expects_exact(prog: dict) -> bool:
    """Built-in layers and readers only: bucketing must serve it (a refusal is a failure)."""
    return (not any(l["kind"] == "Custom" for l in prog["layers"]) and prog["reader"] in READERS_THAT_MASK
            and prog["step"] != "train_last")


def render_layer(l: dict) -> str:
    k = l["kind"]
    if k == "Conv1D":
        return (f"nn.Conv1D({l['filters']}, {l['kernel_size']}, strides={l['strides']}, padding={l['padding']!r}, "
                f"dilation_rate={l['dilation_rate']}, activation={l['activation']!r})")
    if k == "LSTM":
        return f"nn.LSTM({l['units']}, return_sequences=True, reverse={l['reverse']})"
    if k == "GRU":
        return f"nn.GRU({l['units']}, return_sequences=True, go_backwards={l['go_backwards']})"
    if k == "Bidirectional":
        return f"nn.Bidirectional(nn.{l['cell']}({l['units']}, return_sequences=True))"
    if k in ("MaxPooling1D", "AveragePooling1D"):
        return f"nn.{k}({l['pool_size']}, strides={l['strides']})"
    if k == "Dense":
        return f"nn.Dense({l['units']}, activation={l['activation']!r})"
    if k == "Activation":
        return f"nn.Activation({l['activation']!r})"
    if k == "Custom":
        return "Custom()"
    return f"nn.{k}()"


def render(prog: dict) -> str:
    """The source of `make()`, which returns a fresh (model, step) pair from the program's seed."""
    reader = prog["reader"]
    if reader in PYTHON_READERS:
        read = f"Read(lambda h: {PYTHON_READERS[reader]})"
    elif reader == "LSTM":
        read = "nn.LSTM(2)"
    elif reader == "none":
        read = None
    else:
        read = f"nn.{reader}()"
    layers = [render_layer(l) for l in prog["layers"]] + ([read] if read else []) + ["nn.Dense(2)"]
    loss = {"predict": None, "train": "nn.mean_squared_error(encore.full_like(out, 0.5), out)",
            "train_last": "nn.mean_squared_error(encore.full_like(out[:, -1], 0.5), out[:, -1])"}[prog["step"]]
    lines = [
        "class Custom(nn.Module):",
        "    def forward(self, x):",
        "        return x * 2.0",
        "",
        "class Read(nn.Module):",
        "    def __init__(self, fn):",
        "        super().__init__()",
        "        self.fn = fn",
        "",
        "    def forward(self, x):",
        "        return self.fn(x)",
        "",
        "def make():",
        f"    encore.manual_seed({prog['seed']})",
        f"    model = nn.Sequential([{', '.join(layers)}])",
        f"    model.build((2, {prog['sizes'][-1]}, {prog['channels']}))",
        "    opt = optim.SGD(model.parameters(), lr=0.05)",
        "",
        "    def step(x):",
    ]
    if loss is None:
        lines += ["        return model(x)"]
    else:
        lines += ["        opt.zero_grad()", "        out = model(x)", f"        loss = {loss}",
                  "        loss.backward()", "        opt.step()", "        return loss"]
    lines += ["", "    return model, step", ""]
    return "\n".join(lines)


def data(prog: dict, length: int, seed: int) -> encore.Tensor:
    return encore.tensor(np.random.default_rng(seed).standard_normal((2, length, prog["channels"])).astype(np.float32))


def close(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal in value: the same shape, NaNs and infinities in the same places, the rest within
    1e-3 of the larger magnitude (a bucket sums the same terms in another blocking)."""
    if a.shape != b.shape:
        return False
    finite = np.isfinite(a) & np.isfinite(b)
    if not np.array_equal(np.isnan(a), np.isnan(b)) or not np.array_equal(a[~finite], b[~finite], equal_nan=True):
        return False
    scale = max(float(np.max(np.abs(a[finite]), initial=0.0)), float(np.max(np.abs(b[finite]), initial=0.0)), 1e-6)
    return bool(np.max(np.abs(a[finite] - b[finite]), initial=0.0) <= 1e-3 * scale)


def outcome(call):
    """The call's values, or its error: (type name, message, whether it is a ValueError)."""
    try:
        return call().numpy(), None
    except Exception as e:  # noqa: BLE001 (types and messages are compared)
        return None, (type(e).__name__, str(e), isinstance(e, ValueError))


def run(prog: dict):
    """None, or a description of the first failing call."""
    namespace = {"encore": encore, "nn": nn, "optim": optim}
    exec(compile(render(prog), "<program>", "exec"), namespace)
    try:
        eager_model, eager_step = namespace["make"]()
        traced_model, traced_step = namespace["make"]()
    except Exception:  # noqa: BLE001 (a model its first length cannot build: not a bucketing case)
        return None
    f = encore.trace(traced_step, shapes=encore.bucket(1, prog["sizes"]), name="step", retrace_warning=0)
    for i, (length, seed) in enumerate(prog["calls"]):
        x = data(prog, length, seed)
        want, eager_error = outcome(lambda: eager_step(x))
        got, error = outcome(lambda: f(x))
        where = f"call {i} (length {length})"
        if eager_error:
            if error != eager_error:
                return f"{where}: eager raised {eager_error}, the bucketed call {error or 'returned values'}"
        elif error:
            refused = error[2] and any(s in error[1] for s in REFUSED)
            if not refused:
                return f"{where}: eager returned values, the bucketed call raised {error}"
            if expects_exact(prog):
                return f"{where}: a program of masking layers was refused: {error[1][:400]}"
        elif not close(got, want):
            return f"{where}: the bucketed call differs silently from eager:\n    eager  {want.ravel()[:6]}\n" \
                   f"    bucket {got.ravel()[:6]} (shapes {want.shape}, {got.shape})"
        for (name, p), q in zip(eager_model.named_parameters(), traced_model.parameters()):
            if not close(q.numpy(), p.numpy()):
                return f"{where}: parameter {name} differs silently from eager"
    return None


def program_seed(seed: int, index: int) -> int:
    return seed * 1_000_003 + index


def report(seed: int, index: int, prog: dict, found: str) -> str:
    return (f"--- failure, --program {seed}:{index}: {found}\n--- bucket sizes {prog['sizes']}, calls (length, data "
            f"seed) {prog['calls']}\n{render(prog)}")


def fuzz(programs: int, seed: int, out=sys.stdout) -> dict:
    failures = []
    start = time.monotonic()
    for index in range(programs):
        prog = Generator(program_seed(seed, index)).program()
        found = run(prog)
        if found:
            failures.append((index, found))
            print(report(seed, index, prog, found), file=out, flush=True)
    return {"programs": programs, "failures": failures, "seconds": time.monotonic() - start}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--program", help="run one program, SEED:INDEX, and print it")
    args = parser.parse_args(argv)
    if args.program:
        seed, index = map(int, args.program.split(":"))
        prog = Generator(program_seed(seed, index)).program()
        found = run(prog)
        print(report(seed, index, prog, found) if found else render(prog) + "\n# eager and bucketed runs agree")
        return 1 if found else 0
    result = fuzz(args.programs, args.seed)
    print(f"{result['programs']} programs in {result['seconds']:.1f} s; {len(result['failures'])} failed")
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
