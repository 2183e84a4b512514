"""Differential fuzzer for encore.trace: random training programs, run eagerly and with their
step functions wrapped in ``encore.trace``, must agree bit for bit after every action.

A program is a plain dict (so it can be shrunk and printed):

* a model: Sequential (sometimes nested), sometimes starting with an Embedding of integer
  inputs, of Conv1D (valid/same, strides, dilation, activations, with/without bias), LSTM
  (return_sequences, reverse, activations), GRU (return_sequences, go_backwards, reset_after,
  activations), Bidirectional (of either; merge modes), Dropout, Dense,
  Average/MaxPooling1D (valid/same, strides), BatchNormalization (momentum, center, scale),
  LayerNormalization, Activation (gelu, softmax, ...), and Custom — a Python subclass of
  nn.Module with a weight made in its build hook, a Dense and maybe a Dropout inside, and a
  forward that reads self.training; reduced by GlobalAverage/GlobalMaxPooling1D, Flatten or a
  last recurrent layer; a Dense head. float32, sometimes float64;
* a loss (mean_squared_error, binary_crossentropy from logits or probabilities,
  sparse_categorical_crossentropy or categorical_crossentropy (one-hot) from logits or softmax)
  and SGD (momentum, Nesterov, weight decay), Adam or AdamW (Keras' epsilon placement or not)
  or RMSprop (momentum, centered), sometimes clipping gradients by global norm or by value;
  captured buffers and a tensor to pass as an argument;
* 1-3 step functions made of statements: zero_grad (set_to_none or not, maybe under a static
  bool), forward/backward over 1, 2 or a static-int number of micro-batches with the loss
  scaled by a static float, step (maybe under the bool), inference (no_grad / training off),
  in-place writes (copy_, fill_, +=, -=, *=, zero_) to captured buffers or the argument,
  buffer and gradient reads, setting lr, calling another traced function; returning nothing,
  a tensor, a tuple or a list; traced with optimize=False, alias_outputs or a small cache
  sometimes;
* 3-14 top-level actions: calls (batches of a few shapes; contiguous, transposed or NumPy
  inputs; contiguous or strided argument views; static 0.0 / -0.0 / NaN among the floats; under
  no_grad or training off), lr changes, zero_grad / step / an eager training step outside,
  buffer writes, re-reading an earlier result, training mode (global, or train()/eval() of the
  model or one of its layers), freezing a parameter, set_data, assigning .grad, clearing a traced
  function's cache.

``render`` turns it into the source of ``program(run)``; differential_harness.py runs it
eagerly and traced and compares parameters, gradients (None or bits), optimizer state, buffers,
the argument, returned values, the generator state and the modes after every action (an error
must be the same type at the same action), and that a traced call with a signature seen before
does not trace again. A failing program is shrunk (fewer actions, statements, layers; smaller
shapes; simpler options) while it fails the same way without using a feature it did not use,
and printed as a standalone script.

    python tests/python/fuzz_traced.py --programs 5000 --seed 1 [--stop-on-first]
    python tests/python/fuzz_traced.py --program 1:42        # one program (seed 1, index 42)
    python tests/python/fuzz_traced.py --disable captured_writes,special_statics   # see FEATURES
"""

from __future__ import annotations

import argparse
import copy
import faulthandler
import inspect
import math
import random
import re
import sys
import time
import warnings

import differential_harness as harness
import encore

# Generator features that --disable turns off (to look past a known bug).
FEATURES = {
    "accumulate": "backward in several calls or micro-batches without zero_grad in between",
    "backward_only": "functions that call backward() without an optimizer step",
    "captured_writes": "writes to captured buffers inside step functions",
    "argument_writes": "in-place writes to tensor arguments",
    "strided_arguments": "transposed / strided views passed as arguments",
    "special_statics": "static floats 0.0, -0.0 and NaN",
    "lr_in_trace": "setting the learning rate inside a step function",
    "grads_none": "zero_grad(set_to_none=True), and calls before the first backward (.grad is None)",
    "error_paths": "actions that raise on both sides (too short inputs, backward under no_grad)",
    "float64": "float64 models",
    "strided_inputs": "non-contiguous input batches",
    "numpy_inputs": "NumPy arrays passed as inputs",
    "freeze": "parameters frozen and unfrozen (requires_grad) between calls",
    "replace_storage": "Tensor.set_data on a parameter between calls",
    "set_grad": "assigning .grad (None or zeros) between calls",
    "clear": "clearing a traced function's cache between calls",
    "nested": "a step function calling another traced step function",
    "alias_outputs": "trace(alias_outputs=True)",
    "unoptimized": "trace(optimize=False)",
    "custom_module": "a Python subclass of nn.Module among the layers",
    "module_modes": "train()/eval() of the model or a layer between calls",
    "swap_layer": "a custom module's child layer replaced by another between calls",
    "clipping": "optimizers that clip gradients by global norm or by value",
}

ACTIVATIONS = ("linear", "tanh", "sigmoid", "relu", "hard_sigmoid", "gelu", "softmax")
RECURRENT = ("LSTM", "GRU", "Bidirectional")
STATIC_SCALES = (1.0, 0.5, 2.0)
SPECIAL_SCALES = (0.0, -0.0, math.nan)


# ---- generation ---------------------------------------------------------------------------


class Generator:
    def __init__(self, seed: int, disabled: frozenset = frozenset()):
        self.r = random.Random(seed)
        self.disabled = disabled

    def on(self, feature: str, p: float) -> bool:
        return feature not in self.disabled and self.r.random() < p

    def program(self) -> dict:
        r = self.r
        dtype = "float64" if self.on("float64", 0.15) else "float32"
        layers = self.model()
        loss = self.loss()
        k = 1 if loss["kind"] == "bce" and r.random() < 0.5 else r.randint(2, 3)
        head = {"kind": "Dense", "units": k, "activation": "linear"}
        if loss["kind"] == "bce" and not loss["from_logits"]:
            head["activation"] = "sigmoid"
        elif loss["kind"] == "mse":
            head["activation"] = r.choice(ACTIVATIONS)
        layers.append(head)
        channels = r.randint(1, 3)
        shapes = self.shapes(layers)
        prog = {
            "seed": r.randrange(1 << 16),
            "dtype": dtype,
            "channels": channels,
            "build": shapes[0],
            "layers": layers,
            "loss": loss,
            "optimizer": self.optimizer(),
            "buffers": {f"buf{i}": r.choice([[], [2], [3]]) for i in range(r.randint(0, 2))},
            "argbuf": [r.randint(2, 3), r.randint(2, 4)],
            "functions": [],
            "actions": [],
        }
        scales = list(STATIC_SCALES[: r.randint(1, 3)])
        if self.on("special_statics", 0.5):
            # Few values, so that calls repeat them: 0.0 after -0.0, NaN after NaN.
            scales = scales[:1] + r.sample(SPECIAL_SCALES, r.randint(1, 3))
        pools = {"shapes": shapes, "scales": scales, "data": [r.randrange(1000) for _ in range(2)]}
        for i in range(r.randint(1, 3)):
            prog["functions"].append(self.function(f"f{i}", prog))
        if "grads_none" in self.disabled:
            prog["actions"].append({"do": "eager", "shape": shapes[0], "data": pools["data"][0], "step": False})
        for _ in range(r.randint(3, 14)):
            calls = sum(a["do"] == "call" for a in prog["actions"])
            prog["actions"].append(self.action(prog, pools, calls))
        return prog

    # -- model

    def model(self) -> list:
        r = self.r
        layers = []
        if r.random() < 0.15:
            layers.append({"kind": "Embedding", "input_dim": r.randint(2, 6), "output_dim": r.randint(1, 3)})
        for _ in range(r.choice([0, 1, 1, 2, 2, 3])):
            layers.append(self.sequence_layer())
        if r.random() < 0.2 and layers:
            cut = r.randrange(len(layers))
            layers = layers[:cut] + [{"kind": "Sequential", "layers": layers[cut:]}]
        reduce = r.choice(["GlobalAveragePooling1D", "GlobalMaxPooling1D", "Flatten", "LSTM", "GRU", "Bidirectional",
                           None])
        if reduce is None and any(not self.keeps_length(l) for l in flat(layers)):
            reduce = "GlobalAveragePooling1D"
        if reduce in RECURRENT:
            layers.append(self.recurrent(reduce, return_sequences=False))
        elif reduce is not None:
            layers.append({"kind": reduce})
        if reduce is not None:
            for _ in range(r.choice([0, 0, 1, 2])):
                extra = [self.dense(), {"kind": "Dropout", "rate": r.choice([0.2, 0.5])}, self.normalization()]
                if self.on("custom_module", 0.5):
                    extra.append(self.custom())
                layers.append(r.choice(extra))
        return layers

    def normalization(self) -> dict:
        r = self.r
        layer = {"kind": r.choice(["BatchNormalization", "LayerNormalization"]), "center": r.random() < 0.8,
                 "scale": r.random() < 0.8}
        if layer["kind"] == "BatchNormalization":
            layer["momentum"] = r.choice([0.99, 0.9, 0.5])
        return layer

    def sequence_layer(self) -> dict:
        r = self.r
        kinds = ["Conv1D", "Conv1D", "LSTM", "GRU", "Bidirectional", "Dropout", "Dense", "Pooling", "Normalization",
                 "Activation"]
        if self.on("custom_module", 1):
            kinds.append("Custom")
        kind = r.choice(kinds)
        if kind == "Custom":
            return self.custom()
        if kind == "Pooling":
            return {"kind": r.choice(["AveragePooling1D", "MaxPooling1D"]), "pool_size": r.randint(1, 3),
                    "strides": r.choice([None, 1, 2]), "padding": r.choice(["valid", "same"])}
        if kind == "Normalization":
            return self.normalization()
        if kind == "Activation":
            return {"kind": "Activation", "activation": r.choice(["gelu", "softmax", "relu", "tanh"])}
        if kind == "Conv1D":
            layer = {"kind": "Conv1D", "filters": r.randint(1, 3), "kernel_size": r.randint(1, 3),
                     "strides": 1, "padding": r.choice(["valid", "same"]), "dilation_rate": 1,
                     "activation": r.choice(ACTIVATIONS), "use_bias": r.random() < 0.8}
            if r.random() < 0.5:
                layer[r.choice(["strides", "dilation_rate"])] = 2
            return layer
        if kind in RECURRENT:
            return self.recurrent(kind, return_sequences=True)
        if kind == "Dropout":
            return {"kind": "Dropout", "rate": r.choice([0.0, 0.25, 0.5])}
        return self.dense()

    def custom(self) -> dict:
        """A Python nn.Module subclass (rendered by CUSTOM_CLASS): per-step, keeps the length."""
        return {"kind": "Custom", "units": self.r.randint(1, 3), "activation": self.r.choice(ACTIVATIONS),
                "rate": self.r.choice([0.0, 0.0, 0.5]), "scaled": self.r.random() < 0.5}

    def dense(self) -> dict:
        return {"kind": "Dense", "units": self.r.randint(1, 3), "activation": self.r.choice(ACTIVATIONS),
                "use_bias": self.r.random() < 0.8}

    def recurrent(self, kind: str, return_sequences: bool) -> dict:
        r = self.r
        cell = r.choice(["LSTM", "GRU"]) if kind == "Bidirectional" else kind
        layer = {"kind": cell, "units": r.randint(1, 3), "activation": r.choice(["tanh", "tanh", "relu", "sigmoid"]),
                 "recurrent_activation": r.choice(["sigmoid", "hard_sigmoid"]),
                 "return_sequences": return_sequences}
        backwards = "reverse" if cell == "LSTM" else "go_backwards"
        layer[backwards] = kind != "Bidirectional" and r.random() < 0.2
        if cell == "LSTM":
            layer["unit_forget_bias"] = r.random() < 0.8
        else:
            layer["reset_after"] = r.random() < 0.7
        if kind != "Bidirectional":
            return layer
        return {"kind": "Bidirectional", "layer": layer, "merge_mode": r.choice(["concat", "sum", "mul", "ave"])}

    @staticmethod
    def keeps_length(layer: dict) -> bool:
        if layer["kind"] == "Conv1D":
            return layer["padding"] == "same" and layer["strides"] == 1
        if layer["kind"] in POOLS:
            return layer["padding"] == "same" and (layer["strides"] or layer["pool_size"]) == 1
        return layer["kind"] in ("Dense", "Dropout", "Embedding", "Activation", "Custom") + RECURRENT + NORMS

    def shapes(self, layers: list) -> list:
        """(batch, steps) pool: the first shape is the common one (the build shape)."""
        r = self.r
        need = min_steps(layers)
        if "grads_none" in self.disabled:
            while recurrent_steps(layers, need) < 2:
                need += 1
        fixed = any(l["kind"] == "Flatten" for l in flat(layers))
        t0 = need + r.randint(0, 3)
        shapes = [[r.randint(1, 4), t0]]
        for _ in range(r.choice([0, 1, 1, 2])):
            varied = not fixed or self.on("error_paths", 0.2)
            t = need + r.randint(0, 4) if varied else t0
            shapes.append([r.randint(1, 5), t])
        if need > 1 and self.on("error_paths", 0.05):
            shapes.append([2, need - 1])
        return shapes

    def loss(self) -> dict:
        kind = self.r.choice(["mse", "bce", "scce", "cce"])
        return {"kind": kind, "from_logits": self.r.random() < 0.5}

    def optimizer(self) -> dict:
        r = self.r
        kind = r.choice(["SGD", "SGD", "Adam", "AdamW", "RMSprop"])
        if kind == "SGD":
            momentum = r.choice([0.0, 0.9])
            o = {"kind": "SGD", "lr": r.choice([0.1, 0.01, 0.5]), "momentum": momentum,
                 "nesterov": momentum > 0 and r.random() < 0.5, "weight_decay": r.choice([0.0, 0.01])}
        elif kind == "RMSprop":
            o = {"kind": "RMSprop", "lr": r.choice([0.001, 0.01]), "rho": r.choice([0.9, 0.8]),
                 "momentum": r.choice([0.0, 0.9]), "centered": r.random() < 0.5}
        else:
            o = {"kind": kind, "lr": r.choice([0.001, 0.01, 0.1]), "weight_decay": r.choice([0.0, 0.01]),
                 "epsilon_hat": r.random() < 0.3}
        if self.on("clipping", 0.3):
            o[r.choice(["global_clipnorm", "clipvalue"])] = r.choice([0.5, 0.05])
        return o

    # -- step functions

    def function(self, name: str, prog: dict) -> dict:
        r = self.r
        template = r.choice(["full", "full", "accumulate", "step", "zero_grad", "inference", "writer",
                             "mixed", "mixed"])
        zero = {"op": "zero_grad", "set_to_none": self.on("grads_none", 0.5), "if_flag": r.random() < 0.2}
        train = {"op": "train", "micro": r.choice([1, 1, 1, 2, "n"]), "scale": r.random() < 0.5, "backward": True}
        step = {"op": "step", "if_flag": r.random() < 0.25}
        if "accumulate" in self.disabled:
            train["micro"] = 1
        body = []
        if template == "full":
            body = [zero, train, step] if r.random() < 0.7 else [train, step, zero]
        elif template == "accumulate" and "backward_only" not in self.disabled:
            body = [train]
        elif template == "step":
            body = [step]
        elif template == "zero_grad":
            body = [zero]
        elif template == "inference":
            body = [self.inference()]
        elif template == "writer":
            body = [self.write(prog, has_loss=False, has_x=True)]
        if not body:  # mixed, or a disabled template
            body = self.mixed(prog, zero, train, step)
        if "backward_only" in self.disabled and any(s["op"] == "train" for s in body) \
                and not any(s["op"] == "step" and not s["if_flag"] for s in body):
            body.append(dict(step, if_flag=False))
        if "accumulate" in self.disabled and any(s["op"] == "train" for s in body) \
                and body[0]["op"] != "zero_grad":
            body.insert(0, dict(zero, if_flag=False))
        options = {}
        if self.on("unoptimized", 0.2):
            options["optimize"] = False
        if self.on("alias_outputs", 0.1):
            options["alias_outputs"] = True
        if r.random() < 0.1:
            options["max_cached"] = 2
        returns = r.choice(["none", "single", "single", "tuple", "list"])
        return {"name": name, "body": body, "returns": returns, "trace": options}

    def inference(self) -> dict:
        return {"op": "infer", "mode": self.r.choice(["no_grad", "eval", "no_grad+eval", "plain"])}

    def write(self, prog: dict, has_loss: bool, has_x: bool) -> dict:
        r = self.r
        targets = []
        if prog["buffers"] and "captured_writes" not in self.disabled:
            targets += list(prog["buffers"])
        if "argument_writes" not in self.disabled:
            targets.append("a")
        if not targets:
            return self.inference()
        # x.mean() of integer ids (an Embedding model) is no value for a float buffer.
        sources = ["const"] + (["loss"] if has_loss else []) + (["x"] if has_x and not embedded(prog) else [])
        return {"op": "write", "target": r.choice(targets),
                "how": r.choice(["fill", "copy", "iadd", "isub", "imul", "zero"]),
                "source": r.choice(sources), "value": r.choice([2.0, -1.5, 0.5])}

    def mixed(self, prog: dict, zero: dict, train: dict, step: dict) -> list:
        r = self.r
        body, has_loss, backward = [], False, False
        for _ in range(r.randint(2, 4)):
            choice = r.choice(["zero", "train", "train", "step", "infer", "write", "write", "read", "lr", "grad",
                               "nested"])
            if choice == "zero":
                body.append(dict(zero))
                backward = backward and not zero["set_to_none"]
            elif choice == "train":
                body.append(dict(train, backward=r.random() < 0.85))
                has_loss, backward = True, backward or body[-1]["backward"]
            elif choice == "step":
                body.append(dict(step))
            elif choice == "infer":
                body.append(self.inference())
            elif choice == "write":
                body.append(self.write(prog, has_loss, has_x=True))
            elif choice == "read" and prog["buffers"]:
                body.append({"op": "read", "target": r.choice(list(prog["buffers"]))})
            elif choice == "lr" and self.on("lr_in_trace", 0.5):
                body.append({"op": "lr", "value": r.choice([0.05, 0.2])})
            elif choice == "grad" and backward:
                body.append({"op": "grad", "index": r.randint(-2, 1)})
            elif choice == "nested" and self.on("nested", 1):
                callees = [f for f in prog["functions"] if set(function_params(f)) <= {"x", "y"}]
                if callees:
                    callee = r.choice(callees)
                    body.append({"op": "nested", "fn": callee["name"], "params": function_params(callee)})
        return body

    # -- top-level actions

    def action(self, prog: dict, pools: dict, calls: int) -> dict:
        r = self.r
        kind = r.choices(["call", "lr", "zero_grad", "step", "eager", "write", "reread", "training", "freeze",
                          "set_data", "set_grad", "clear", "module_mode", "swap_layer"],
                         weights=[64, 7, 7, 4, 6, 4, 4, 4, 2, 2, 2, 2, 5, 3])[0]
        if kind == "call":
            fn = r.choice(prog["functions"])
            params = function_params(fn)
            act = {"do": "call", "fn": fn["name"]}
            if "x" in params:
                act["shape"] = r.choice(pools["shapes"][:1] * 2 + pools["shapes"])
                act["data"] = r.choice(pools["data"])
                layouts = ["tensor"] * 8
                if "strided_inputs" not in self.disabled:
                    layouts.append("strided")
                # x.mean() of a NumPy array is NumPy's, not encore's: a difference by design.
                if "numpy_inputs" not in self.disabled and not reads_x(fn, prog):
                    layouts.append("numpy")
                act["layout"] = r.choice(layouts)
            if "a" in params:
                views = ["plain"] + (["T", "cols", "rows"] if "strided_arguments" not in self.disabled else [])
                act["view"] = r.choice(views)
            if "scale" in params:
                act["scale"] = r.choice(pools["scales"])
            if "n" in params:
                act["n"] = r.choice([1, 2, 3])
            if "flag" in params:
                act["flag"] = r.random() < 0.5
            act["mode"] = r.choices(["", "no_grad", "eval", "no_grad+eval"], weights=[85, 6, 6, 3])[0]
            backward = any(s["op"] == "train" and s["backward"] for s in fn["body"])
            if backward and "no_grad" in act["mode"] and "error_paths" in self.disabled:
                act["mode"] = "eval"
            return act
        if kind == "lr":
            return {"do": "lr", "value": r.choice([0.05, 0.2, 0.001])}
        if kind == "zero_grad":
            return {"do": "zero_grad", "set_to_none": self.on("grads_none", 0.5)}
        if kind == "step":
            return {"do": "step"}
        if kind == "eager":
            return {"do": "eager", "shape": pools["shapes"][0], "data": r.choice(pools["data"]),
                    "step": r.random() < 0.3, "zero_first": not self.on("accumulate", 0.7)}
        if kind == "write" and prog["buffers"]:
            return {"do": "write", "target": r.choice(list(prog["buffers"])), "value": r.choice([1.0, -2.0])}
        if kind == "reread" and calls:
            return {"do": "reread", "index": -r.randint(1, min(calls, 2))}
        if kind == "freeze" and self.on("freeze", 1):
            return {"do": "freeze", "index": r.randint(-2, 1), "on": r.random() < 0.4}
        if kind == "set_data" and self.on("replace_storage", 1):
            return {"do": "set_data", "index": r.randint(-2, 1)}
        if kind == "set_grad" and self.on("set_grad", 1):
            return {"do": "set_grad", "index": r.randint(-2, 1), "none": self.on("grads_none", 0.5)}
        if kind == "clear" and self.on("clear", 1):
            return {"do": "clear", "fn": r.choice(prog["functions"])["name"]}
        if kind == "module_mode" and self.on("module_modes", 1):
            target = r.choice(["model", "model", r.randrange(len(prog["layers"]))])
            return {"do": "module_mode", "target": target, "on": r.random() < 0.5}
        custom = any(layer["kind"] == "Custom" for layer in flat(prog["layers"]))
        if kind == "swap_layer" and custom and self.on("swap_layer", 1):
            return {"do": "swap_layer"}
        return {"do": "training", "on": r.random() < 0.5}


POOLS = ("AveragePooling1D", "MaxPooling1D")
NORMS = ("BatchNormalization", "LayerNormalization")


def embedded(prog: dict) -> bool:
    """Whether the model starts with an Embedding: its inputs are integer ids (B, T)."""
    first = next(flat(prog["layers"]), None)
    return first is not None and first["kind"] == "Embedding"


def reads_x(fn: dict, prog: dict) -> bool:
    """Whether `fn`, or a function it calls, computes with the values of its input x."""
    for s in fn["body"]:
        if s.get("source") == "x":
            return True
        if s["op"] == "nested" and reads_x(next(f for f in prog["functions"] if f["name"] == s["fn"]), prog):
            return True
    return False


def flat(layers: list):
    for layer in layers:
        if layer["kind"] == "Sequential":
            yield from flat(layer["layers"])
        else:
            yield layer


def reduces(layer: dict) -> bool:
    """Whether `layer` turns (batch, steps, channels) into (batch, channels)."""
    if layer["kind"] in ("LSTM", "GRU"):
        return not layer["return_sequences"]
    if layer["kind"] == "Bidirectional":
        return not layer["layer"]["return_sequences"]
    return layer["kind"] in ("GlobalAveragePooling1D", "GlobalMaxPooling1D", "Flatten")


def min_steps(layers: list) -> int:
    """The shortest input length every layer accepts."""
    for t in range(1, 64):
        if steps_after(layers, t) is not None:
            return t
    return 64


def steps_after(layers: list, t: int):
    for layer in flat(layers):
        if layer["kind"] == "Conv1D":
            span = layer["dilation_rate"] * (layer["kernel_size"] - 1) + 1
            if layer["padding"] == "valid":
                t = (t - span) // layer["strides"] + 1 if t >= span else 0
            else:
                t = -(-t // layer["strides"])
            if t < 1:
                return None
        elif layer["kind"] in POOLS:
            stride = layer["strides"] or layer["pool_size"]
            if layer["padding"] == "valid":
                t = (t - layer["pool_size"]) // stride + 1 if t >= layer["pool_size"] else 0
            else:
                t = -(-t // stride)
            if t < 1:
                return None
    return t


def called_functions(prog: dict) -> list:
    """The functions that top-level actions call, directly or from another function."""
    names = {a["fn"] for a in prog["actions"] if a["do"] == "call"}
    for fn in reversed(prog["functions"]):  # a function calls only earlier ones
        if fn["name"] in names:
            names |= {s["fn"] for s in fn["body"] if s["op"] == "nested"}
    return [f for f in prog["functions"] if f["name"] in names]


def recurrent_steps(layers: list, t: int) -> int:
    """The fewest steps a recurrent layer of `layers` sees on inputs of length `t` (a large number when
    there is none)."""
    fewest = 1 << 30
    for i, layer in enumerate(flat(layers)):
        if layer["kind"] in RECURRENT:
            steps = steps_after(list(flat(layers))[:i], t)
            fewest = min(fewest, steps if steps is not None else 0)
    return fewest


def function_params(fn: dict) -> list:
    ops = {s["op"] for s in fn["body"]}
    uses_x = bool(ops & {"train", "infer"}) or any(s.get("source") == "x" or "x" in s.get("params", ())
                                                   for s in fn["body"])
    params = []
    if uses_x:
        params += ["x", "y"]
    if any(s.get("target") == "a" for s in fn["body"] if s["op"] == "write"):
        params.append("a")
    if any(s["op"] == "train" and s["scale"] for s in fn["body"]):
        params.append("scale")
    if any(s["op"] == "train" and s["micro"] == "n" for s in fn["body"]):
        params.append("n")
    if any(s.get("if_flag") for s in fn["body"]):
        params.append("flag")
    return params


# ---- rendering ----------------------------------------------------------------------------


def literal(v) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return 'float("nan")'
        return "-0.0" if v == 0 and math.copysign(1, v) < 0 else repr(v)
    return repr(v)


CUSTOM_CLASS = [
    "class Custom(nn.Module):",
    "    def __init__(self, units, activation='linear', rate=0.0, scaled=False):",
    "        super().__init__()",
    "        self.inner = nn.Dense(units, activation=activation)",
    "        self.spare = nn.Dense(units, activation=activation)  # swapped with inner by swap_layer",
    "        self.drop = nn.Dropout(rate) if rate else None",
    "        self.scaled = scaled",
    "",
    "    def build(self, input_shape):",
    "        self.gain = self.add_weight((input_shape[-1],), initializer='ones')",
    "        self.spare.build(input_shape)",
    "",
    "    def forward(self, x):",
    "        h = self.inner(x * self.gain)",
    "        if self.drop is not None:",
    "            h = self.drop(h)",
    "        return h * 0.5 if self.scaled and self.training else h",
    "",
    "",
    "def swap_layer(module):",
    "    if isinstance(module, Custom):",
    "        module.inner, module.spare = module.spare, module.inner",
    "    elif isinstance(module, nn.Sequential):",
    "        for i in range(len(module)):",
    "            swap_layer(module[i])",
    "",
]

LAYER_DEFAULTS = {
    "AveragePooling1D": {"strides": None, "padding": "valid"},
    "MaxPooling1D": {"strides": None, "padding": "valid"},
    "BatchNormalization": {"momentum": 0.99, "center": True, "scale": True},
    "LayerNormalization": {"center": True, "scale": True},
    "Dense": {"activation": "linear", "use_bias": True},
    "Conv1D": {"strides": 1, "padding": "valid", "dilation_rate": 1, "activation": "linear", "use_bias": True},
    "LSTM": {"activation": "tanh", "recurrent_activation": "sigmoid", "return_sequences": False,
             "reverse": False, "unit_forget_bias": True},
    "GRU": {"activation": "tanh", "recurrent_activation": "sigmoid", "return_sequences": False,
            "go_backwards": False, "reset_after": True},
    "Bidirectional": {"merge_mode": "concat"},
    "Custom": {"activation": "linear", "rate": 0.0, "scaled": False},
}
POSITIONAL = {"Dense": ["units"], "Conv1D": ["filters", "kernel_size"], "LSTM": ["units"], "GRU": ["units"],
              "Dropout": ["rate"], "Bidirectional": ["layer"], "Sequential": ["layers"],
              "AveragePooling1D": ["pool_size"], "MaxPooling1D": ["pool_size"],
              "Embedding": ["input_dim", "output_dim"], "Activation": ["activation"], "Custom": ["units"]}


def render_layer(layer: dict) -> str:
    kind = layer["kind"]
    args = []
    for key in POSITIONAL.get(kind, []):
        v = layer[key]
        if key == "layer":
            args.append(render_layer(v))
        elif key == "layers":
            args.append("[" + ", ".join(render_layer(l) for l in v) + "]")
        else:
            args.append(literal(v))
    for key, default in LAYER_DEFAULTS.get(kind, {}).items():
        if layer.get(key, default) != default:
            args.append(f"{key}={literal(layer[key])}")
    return f"{'' if kind == 'Custom' else 'nn.'}{kind}({', '.join(args)})"


def render_loss(loss: dict) -> str:
    if loss["kind"] == "mse":
        return "nn.mean_squared_error(y, out)"
    if loss["kind"] == "bce":
        return "nn.binary_crossentropy(y, out, from_logits=True)" if loss["from_logits"] else \
            "nn.binary_crossentropy(y, out)"
    name = "sparse_categorical_crossentropy" if loss["kind"] == "scce" else "categorical_crossentropy"
    if loss["from_logits"]:
        return f"nn.{name}(y, out, from_logits=True)"
    return f"nn.{name}(y, encore.softmax(out))"


def render_statement(s: dict, prog: dict) -> list:
    op = s["op"]
    if op == "zero_grad":
        line = "opt.zero_grad()" if s["set_to_none"] else "opt.zero_grad(set_to_none=False)"
        return ["if flag:", "    " + line] if s["if_flag"] else [line]
    if op == "step":
        return ["if flag:", "    opt.step()"] if s["if_flag"] else ["opt.step()"]
    if op == "train":
        scale = " * scale" if s["scale"] else ""
        backward = ["loss.backward()"] if s["backward"] else []
        if s["micro"] == 1:
            return ["out = model(x)", f"loss = loss_fn(y, out){scale}"] + backward
        n = "n" if s["micro"] == "n" else str(s["micro"])
        back = ["    part.backward()"] if s["backward"] else []
        return [f"size = -(-x.shape[0] // {n})",
                "for i in range(0, x.shape[0], size):",
                "    out = model(x[i:i + size])",
                f"    part = loss_fn(y[i:i + size], out){scale}"] + back + [
                "    loss = part if i == 0 else loss + part"]
    if op == "infer":
        mode = s["mode"]
        if mode == "plain":
            return ["pred = model(x)"]
        scope = {"no_grad": "encore.no_grad()", "eval": "encore.training(False)",
                 "no_grad+eval": "encore.no_grad(), encore.training(False)"}[mode]
        return [f"with {scope}:", "    pred = model(x)"]
    if op == "write":
        t = s["target"]
        src = {"const": literal(s["value"]), "loss": "loss.detach()", "x": "x.mean()"}[s["source"]]
        return [{"fill": f"{t}.fill_({literal(s['value'])})",
                 "copy": f"{t}.copy_({t} * 0.5 + {src})",
                 "iadd": f"{t} += {src}",
                 "isub": f"{t} -= {src}",
                 "imul": f"{t} *= {literal(s['value'])}",
                 "zero": f"{t}.zero_()"}[s["how"]]]
    if op == "read":
        return [f"seen = {s['target']} * 1.0"]
    if op == "lr":
        return [f"opt.lr = {literal(s['value'])}"]
    if op == "grad":
        return [f"g = {param(s['index'])}.grad * 1.0"]
    if op == "nested":
        return [f"{s['fn']}({', '.join(s['params'])})"]
    raise ValueError(op)


PRODUCES = {"train": "loss", "infer": "pred", "read": "seen", "grad": "g"}


def render_function(fn: dict, prog: dict) -> list:
    params = function_params(fn)
    globals_written = sorted({s["target"] for s in fn["body"] if s["op"] == "write" and s["target"] != "a"
                              and s["how"] in ("iadd", "isub", "imul")})
    lines = [f"def {fn['name']}({', '.join(params)}):"]
    if globals_written:
        lines.append(f"    nonlocal {', '.join(globals_written)}")
    produced = []
    for s in fn["body"]:
        lines += ["    " + l for l in render_statement(s, prog)]
        name = PRODUCES.get(s["op"])
        if name and name not in produced:
            produced.append(name)
        if s["op"] == "train" and "out" not in produced:
            produced.append("out")
    if fn["returns"] != "none" and produced:
        if fn["returns"] == "single":
            lines.append(f"    return {produced[0]}")
        elif fn["returns"] == "tuple":
            lines.append(f"    return {', '.join(produced[:2])}" + ("," if len(produced) == 1 else ""))
        else:
            lines.append(f"    return [{', '.join(produced[:2])}]")
    elif len(lines) == 1:
        lines.append("    pass")
    options = "".join(f", {k}={literal(v)}" for k, v in fn["trace"].items())
    lines.append(f"{fn['name']} = run.trace({fn['name']}{options})")
    return lines


VIEWS = {"plain": "argbuf", "T": "argbuf.T", "cols": "argbuf[:, ::2]", "rows": "argbuf[1:]"}
MODES = {"no_grad": "encore.no_grad()", "eval": "encore.training(False)",
         "no_grad+eval": "encore.no_grad(), encore.training(False)"}


def param(index: int) -> str:
    # Every model ends with a Dense layer with a bias: indices -2 to 1 exist.
    return f"model.parameters()[{index}]"


def render_action(i: int, act: dict, prog: dict) -> list:
    do = act["do"]
    if do == "call":
        fn = next((f for f in prog["functions"] if f["name"] == act["fn"]), None)
        if fn is None:
            return []
        args = []
        for p in function_params(fn):
            if p == "x":
                layout = act.get("layout", "tensor")
                extra = f", {literal(layout)}" if layout != "tensor" else ""
                args.append(f"*data({act['shape'][0]}, {act['shape'][1]}, {act['data']}{extra})")
            elif p == "a":
                args.append(VIEWS[act["view"]])
            elif p == "scale":
                args.append(literal(act["scale"]))
            elif p == "n":
                args.append(str(act["n"]))
            elif p == "flag":
                args.append(str(act["flag"]))
        call = f"run.call({', '.join([act['fn']] + args)})"
        scope = f", {MODES[act['mode']]}" if act.get("mode") else ""
        label = f"{act['fn']}({', '.join(args)})" + (f" under {act['mode']}" if act.get("mode") else "")
        return [f"with run.action({literal(f'{i}: ' + label)}){scope}:", f"    {call}"]
    if do == "lr":
        body = [f"opt.lr = {literal(act['value'])}"]
    elif do == "zero_grad":
        body = ["opt.zero_grad()" if act["set_to_none"] else "opt.zero_grad(set_to_none=False)"]
    elif do == "step":
        body = ["opt.step()"]
    elif do == "eager":
        body = ((["opt.zero_grad(set_to_none=False)"] if act.get("zero_first") else []) +
                [f"x, y = data({act['shape'][0]}, {act['shape'][1]}, {act['data']})",
                 "loss_fn(y, model(x)).backward()"] + (["opt.step()"] if act["step"] else []))
    elif do == "write":
        if act["target"] not in prog["buffers"]:
            return []
        body = [f"{act['target']} += {literal(act['value'])}"]
    elif do == "reread":
        body = [f"run.out = run.kept[{act['index']}]"]
    elif do == "training":
        body = [f"encore.set_training({act['on']})"]
    elif do == "module_mode":
        module = "model" if act["target"] == "model" else f"model[{act['target']} % len(model)]"
        body = [f"{module}.train({act['on']})" if act["on"] else f"{module}.eval()"]
    elif do == "swap_layer":
        body = ["swap_layer(model)", "run.structure_changes += 1"]
    elif do == "freeze":
        body = [f"{param(act['index'])}.requires_grad = {act['on']}"]
    elif do == "set_data":
        body = [f"p = {param(act['index'])}", "p.set_data(p.detach() * 0.5)"]
    elif do == "set_grad":
        body = [f"p = {param(act['index'])}",
                "p.grad = None" if act["none"] else "p.grad = encore.zeros(*p.shape, dtype=p.dtype)"]
    elif do == "clear":
        if not any(a.get("fn") == act["fn"] for a in prog["actions"] if a["do"] == "call"):
            return []
        body = [f"run.clear({act['fn']})"]
    else:
        raise ValueError(do)
    label = body[0] if len(body) == 1 else do
    return [f"with run.action({literal(f'{i}: ' + label)}):"] + ["    " + l for l in body]


def render(prog: dict) -> str:
    """The source of `program(run)` (see differential_harness.py)."""
    dt = prog["dtype"]
    layers = prog["layers"]
    head_units = layers[-1]["units"]
    rows = "(B,)" if any(reduces(l) for l in flat(layers)) else "(B, T)"
    if prog["loss"]["kind"] == "scce":
        target = f"r.integers(0, {head_units}, {rows})"
    elif prog["loss"]["kind"] == "cce":
        target = f"np.eye({head_units}, dtype=np.{dt})[r.integers(0, {head_units}, {rows})]"
    elif prog["loss"]["kind"] == "bce":
        target = f"r.integers(0, 2, {rows} + ({head_units},)).astype(np.{dt})"
    else:
        target = f"r.standard_normal({rows} + ({head_units},)).astype(np.{dt})"
    b0, t0 = prog["build"]
    o = prog["optimizer"]
    extra = "".join(f", {k}={literal(v)}" for k, v in o.items() if k not in ("kind", "lr") and v)
    called = called_functions(prog)
    statements = [s for f in called for s in f["body"]]
    used = {s.get("target") for s in statements} | {a.get("target") for a in prog["actions"]}
    buffers = {b: shape for b, shape in prog["buffers"].items() if b in used}
    watch = ["model=model", "opt=opt"] + [f"{b}={b}" for b in buffers]
    lines = (CUSTOM_CLASS if any(l["kind"] == "Custom" for l in flat(layers)) else []) + [
        f"encore.manual_seed({prog['seed']})",
        "model = nn.Sequential([" + ", ".join(render_layer(l) for l in layers) + "])",
        f"model.build(({b0}, {t0}))" if embedded(prog) else f"model.build(({b0}, {t0}, {prog['channels']}))",
    ]
    if dt == "float64":
        lines.append('model.to("float64")')
    lines.append(f"opt = optim.{o['kind']}(model.parameters(), lr={literal(o['lr'])}{extra})")
    for b, shape in buffers.items():
        lines.append(f"{b} = encore.zeros({', '.join(map(str, shape))}{', ' if shape else ''}dtype=encore.{dt})")
    if "a" in used:
        rr, cc = prog["argbuf"]
        lines.append(f"argbuf = encore.tensor(np.arange({rr * cc}.0).reshape({rr}, {cc}).astype(np.{dt}))")
        watch.append("argbuf=argbuf")
    lines += [f"run.watch({', '.join(watch)})", "",
              "def loss_fn(y, out):", f"    return {render_loss(prog['loss'])}", "",
              "def data(B, T, seed, layout='tensor'):",
              "    r = np.random.default_rng(seed)",
              f"    x = r.integers(0, {next(flat(layers))['input_dim']}, (B, T))" if embedded(prog) else
              f"    x = r.standard_normal((B, T, {prog['channels']})).astype(np.{dt})",
              f"    y = {target}"]
    layouts = {a.get("layout", "tensor") for a in prog["actions"]}
    if "numpy" in layouts:
        lines += ["    if layout == 'numpy':", "        return x, y"]
    if "strided" in layouts:
        lines += ["    if layout == 'strided':  # the same values, not contiguous",
                  "        return encore.tensor(np.ascontiguousarray(np.swapaxes(x, 0, 1))).transpose(0, 1), "
                  "encore.tensor(y)"]
    lines += ["    return encore.tensor(x), encore.tensor(y)", ""]
    for fn in called:
        lines += render_function(fn, prog) + [""]
    for i, act in enumerate(prog["actions"]):
        lines += render_action(i, act, prog)
    return "def program(run):\n" + "\n".join("    " + l if l else "" for l in lines) + "\n"


def script(prog: dict, note: str = "") -> str:
    """A standalone reproduction: the harness, the program and a main."""
    header = f'"""Reproduction found by tests/python/fuzz_traced.py{note}."""\n\nimport sys\n'
    body = inspect.getsource(harness).split('"""', 2)[2].lstrip("\n")  # without the module docstring
    return (header + body + "\n\n" + render(prog) +
            '\n\nif __name__ == "__main__":\n    sys.exit(main(program))\n')


# ---- running and shrinking ----------------------------------------------------------------


def run(prog: dict) -> tuple:
    """The first difference between the eager and the traced run of `prog` (or None), and
    whether an action of the eager run raised."""
    namespace = dict(vars(harness))
    exec(compile(render(prog), "<program>", "exec"), namespace)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", encore.RetraceWarning)
        eager = harness.execute(namespace["program"], traced=False)
        traced = harness.execute(namespace["program"], traced=True)
    return harness.first_difference(eager, traced), any(error for _, error, _, _ in eager)


def features_used(prog: dict, raised: bool) -> set:
    """The FEATURES that `prog` exercises (a shrunk program must not gain one)."""
    functions = called_functions(prog)
    statements = [s for f in functions for s in f["body"]]
    calls = [a for a in prog["actions"] if a["do"] == "call"]
    used = set()
    for f in functions:
        backward = any(s["op"] == "train" and s["backward"] for s in f["body"])
        if backward and not any(s["op"] == "step" and not s["if_flag"] for s in f["body"]):
            used.add("backward_only")
        if backward and (f["body"][0]["op"] != "zero_grad" or f["body"][0]["if_flag"]):
            used.add("accumulate")
        if any(s["op"] == "train" and s["backward"] and s["micro"] != 1 for s in f["body"]):
            used.add("accumulate")
        if f["trace"].get("optimize") is False:
            used.add("unoptimized")
        if f["trace"].get("alias_outputs"):
            used.add("alias_outputs")
    if any(a["do"] == "eager" and not a.get("zero_first") for a in prog["actions"][1:]):
        used.add("accumulate")
    if {"global_clipnorm", "clipvalue"} & set(prog["optimizer"]):
        used.add("clipping")
    if any(s["op"] == "write" and s["target"] != "a" for s in statements):
        used.add("captured_writes")
    if any(s["op"] == "write" and s["target"] == "a" for s in statements):
        used.add("argument_writes")
    if any(s["op"] == "lr" for s in statements):
        used.add("lr_in_trace")
    if any(s["op"] == "nested" for s in statements):
        used.add("nested")
    if any(a.get("view", "plain") != "plain" for a in calls):
        used.add("strided_arguments")
    if any(math.isnan(a["scale"]) or a["scale"] == 0 for a in calls if "scale" in a):
        used.add("special_statics")
    if any(s["op"] == "zero_grad" and s["set_to_none"] for s in statements) or \
            any(a["do"] == "zero_grad" and a["set_to_none"] for a in prog["actions"]) or \
            not (prog["actions"] and prog["actions"][0]["do"] == "eager"):
        used.add("grads_none")
    if prog["dtype"] == "float64":
        used.add("float64")
    lengths = [prog["build"][1]] + [a["shape"][1] for a in prog["actions"] if "shape" in a]
    if any(recurrent_steps(prog["layers"], t) < 2 for t in lengths):
        used.add("grads_none")  # one step: the recurrent kernels get no gradient
    for layout, feature in (("strided", "strided_inputs"), ("numpy", "numpy_inputs")):
        if any(a.get("layout") == layout for a in calls):
            used.add(feature)
    for do, feature in (("freeze", "freeze"), ("set_data", "replace_storage"), ("set_grad", "set_grad"),
                        ("clear", "clear")):
        if any(a["do"] == do for a in prog["actions"]):
            used.add(feature)
    if any(a["do"] == "set_grad" and a["none"] for a in prog["actions"]):
        used.add("grads_none")
    if any(layer["kind"] == "Custom" for layer in flat(prog["layers"])):
        used.add("custom_module")
    if any(a["do"] == "module_mode" for a in prog["actions"]):
        used.add("module_modes")
    if any(a["do"] == "swap_layer" for a in prog["actions"]):
        used.add("swap_layer")
    if raised:
        used.add("error_paths")
    return used


CATEGORY_ORDER = ("modes", "generator", "grad-none", "grad", "returned", "argument", "buffer", "optimizer",
                  "param", "lr")


def category(key: str, details: str) -> str:
    if key in ("modes", "generator", "returned"):
        return key
    if key.endswith(".modes"):
        return "modes"
    if key == "argbuf":
        return "argument"
    if key.startswith("buf"):
        return "buffer"
    if key == "opt.lr":
        return "lr"
    if key.startswith("opt."):
        return "optimizer"
    if key.endswith(".grad"):
        one_none = re.search(rf"^ *{re.escape(key)}:\n    eager  (None|.*\n    traced None)$", details, re.M)
        return "grad-none" if one_none else "grad"
    return "param"


def signature(found) -> tuple:
    """What a shrunk program must keep failing with."""
    _, _, kind, what, details = found
    if kind.startswith("value"):
        cats = {category(k, details) for k in what}
        return kind, min(cats, key=CATEGORY_ORDER.index)
    if kind == "error":
        return kind, tuple(what)
    return (kind,)


SIMPLER = {
    "units": [1], "filters": [1], "kernel_size": [1], "strides": [1], "dilation_rate": [1],
    "activation": ["linear"], "recurrent_activation": ["sigmoid"], "use_bias": [False],
    "reverse": [False], "unit_forget_bias": [True], "go_backwards": [False], "reset_after": [True],
    "merge_mode": ["concat"], "rate": [0.0],
    "channels": [1], "dtype": ["float32"], "momentum": [0.0], "nesterov": [False], "weight_decay": [0.0],
    "micro": [1], "scale": [False, 1.0], "backward": [False], "if_flag": [False], "set_to_none": [True],
    "mode": ["", "plain"], "view": ["plain"], "layout": ["tensor"], "none": [False],
    "returns": ["none", "single"], "optimize": [True],
    "alias_outputs": [False], "max_cached": [32], "from_logits": [True], "n": [1], "flag": [True],
    "step": [False], "zero_first": [False], "padding": ["valid"], "index": [-1, 0], "seed": [0], "data": [0],
    "pool_size": [1], "center": [True], "input_dim": [2], "output_dim": [1], "scaled": [False], "target": ["model"],
}


def candidates(prog: dict, failing_index: int):
    """Simpler variants of `prog`, the biggest cuts first."""
    acts = prog["actions"]
    if len(acts) > failing_index + 1:
        yield dict(prog, actions=acts[: failing_index + 1])
    n = len(acts)
    chunk = n // 2
    while chunk >= 1:
        for start in range(0, n - chunk + 1, chunk):
            yield dict(prog, actions=acts[:start] + acts[start + chunk:])
        chunk //= 2
    for i, fn in enumerate(prog["functions"]):
        for j in range(len(fn["body"])):
            body = fn["body"][:j] + fn["body"][j + 1:]
            yield with_path(prog, ("functions", i, "body"), body)
    for path, layers in layer_lists(prog["layers"], ("layers",)):
        for j in range(len(layers) - (1 if path == ("layers",) else 0)):
            yield with_path(prog, path, layers[:j] + layers[j + 1:])
            if layers[j]["kind"] == "Sequential":
                yield with_path(prog, path, layers[:j] + layers[j]["layers"] + layers[j + 1:])
    for b, shape in prog["buffers"].items():
        if shape:
            yield with_path(prog, ("buffers", b), [])
    if prog["argbuf"] != [2, 2]:
        yield dict(prog, argbuf=[2, 2])
    if prog["optimizer"]["kind"] != "SGD":
        yield dict(prog, optimizer={"kind": "SGD", "lr": 0.1, "momentum": 0.0, "nesterov": False, "weight_decay": 0.0})
    clip = {"global_clipnorm", "clipvalue"} & set(prog["optimizer"])
    if clip:
        yield dict(prog, optimizer={k: v for k, v in prog["optimizer"].items() if k not in clip})
    if prog["loss"]["kind"] != "mse" and prog["layers"][-1]["activation"] in ("linear", "sigmoid"):
        yield dict(prog, loss={"kind": "mse", "from_logits": True})
    b, t = prog["build"]
    for nb, nt in ((1, t), (b, t - 1)):
        if nb >= 1 and nt >= 1 and (nb, nt) != (b, t):
            yield dict(prog, build=[nb, nt])
    for i, act in enumerate(acts):
        if "shape" in act:
            b, t = act["shape"]
            for nb, nt in ((1, t), (b, t - 1), (b - 1, t)):
                if nb >= 1 and nt >= 1 and (nb, nt) != (b, t):
                    yield with_path(prog, ("actions", i, "shape"), [nb, nt])
        if act["do"] == "call" and "mode" in act and act["mode"]:
            yield with_path(prog, ("actions", i, "mode"), "")
    yield from simpler_fields(prog, prog, ())


def layer_lists(layers: list, path: tuple):
    yield path, layers
    for j, layer in enumerate(layers):
        if layer["kind"] == "Sequential":
            yield from layer_lists(layer["layers"], path + (j, "layers"))


def simpler_fields(root: dict, node, path: tuple):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in SIMPLER and not isinstance(value, (dict, list)):
                # Only values simpler than the current one (earlier in the list): no cycles.
                options = [v for v in SIMPLER[key] if type(v) is type(value)]
                if value in options:
                    options = options[: options.index(value)]
                for v in options:
                    yield with_path(root, path + (key,), v)
            elif key == "trace" and value:
                yield with_path(root, path + (key,), {})
            if isinstance(value, (dict, list)):
                yield from simpler_fields(root, value, path + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            if isinstance(value, (dict, list)):
                yield from simpler_fields(root, value, path + (i,))


def with_path(prog: dict, path: tuple, value) -> dict:
    new = copy.deepcopy(prog)
    node = new
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return new


def shrink(prog: dict, found, raised: bool, budget_s: float = 60.0):
    """The smallest variant of `prog` found within the budget that fails with the same
    signature, and its difference."""
    want = signature(found)
    features = features_used(prog, raised)
    deadline = time.monotonic() + budget_s
    position, improved = 0, False
    # One pass tries every candidate in order; after a success the candidates are made again
    # from the smaller program and the pass goes on from the same position.
    while time.monotonic() < deadline:
        cands = list(candidates(prog, found[0]))
        if position >= len(cands):
            if not improved:
                break
            position, improved = 0, False
            continue
        cand = cands[position]
        try:
            got, got_raised = run(cand)
        except Exception:  # noqa: BLE001 (a candidate the renderer cannot express)
            got = None
        # The same failure, with no feature the program did not use (not another bug).
        if got is not None and signature(got) == want and features_used(cand, got_raised) <= features:
            prog, found, raised, improved = cand, got, got_raised, True
            features = features_used(prog, raised)
        else:
            position += 1
    return prog, found, raised


def fingerprint(prog: dict, found, raised: bool) -> tuple:
    """Tells shrunk failures apart: the signature, the features and the statements left."""
    ops = sorted({s["op"] + ("/" + s.get("how", "") if s["op"] == "write" else "")
                  for f in called_functions(prog) for s in f["body"]})
    acts = sorted({a["do"] for a in prog["actions"]})
    return signature(found) + (tuple(sorted(features_used(prog, raised))), tuple(ops), tuple(acts))


def program_seed(seed: int, index: int) -> int:
    return seed * 1_000_003 + index


def report(seed: int, index: int, prog: dict, found, raised: bool, disabled: frozenset) -> str:
    where = f", --program {seed}:{index}" + (f" --disable {','.join(sorted(disabled))}" if disabled else "")
    action, label, _, _, details = found
    features = ", ".join(sorted(features_used(prog, raised))) or "none"
    return (f"--- failure ({' '.join(map(str, signature(found)))}) at action {action} `{label}`{where}\n"
            f"  {details}\n  features used (--disable to avoid): {features}\n"
            f"--- reproduction:\n{script(prog, where)}")


def fuzz(programs: int, seed: int, stop_on_first: bool = False, shrink_budget_s: float = 60.0,
         disabled: frozenset = frozenset(), max_shrinks_per_signature: int = 2, out=sys.stdout,
         verbose: bool = False) -> dict:
    """Runs `programs` programs; returns {fingerprint: (seed, index, shrunk program, found)} and counts."""
    failures, raw, shrunk_count = {}, {}, {}
    skipped = 0
    start = time.monotonic()
    for index in range(programs):
        prog = Generator(program_seed(seed, index), disabled).program()
        if verbose:
            print(f"program {seed}:{index}", file=sys.stderr, flush=True)
        found, raised = run(prog)
        if found is not None and features_used(prog, raised) & disabled:
            skipped += 1  # a failure that needs a disabled feature (one the generator could not avoid)
            continue
        if found is None:
            continue
        sig = signature(found)
        raw[sig] = raw.get(sig, 0) + 1
        if shrunk_count.get(sig, 0) >= max_shrinks_per_signature:
            continue
        shrunk_count[sig] = shrunk_count.get(sig, 0) + 1
        small, small_found, small_raised = shrink(prog, found, raised, shrink_budget_s)
        key = fingerprint(small, small_found, small_raised)
        if key not in failures:
            failures[key] = (seed, index, small, small_found)
            print(report(seed, index, small, small_found, small_raised, disabled), file=out, flush=True)
        if stop_on_first:
            break
    elapsed = time.monotonic() - start
    return {"failures": failures, "raw": raw, "programs": index + 1 if programs else 0, "seconds": elapsed,
            "skipped": skipped}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--program", help="run one program, SEED:INDEX, and print it")
    parser.add_argument("--stop-on-first", action="store_true")
    parser.add_argument("--shrink-budget", type=float, default=60.0, help="seconds per shrink")
    parser.add_argument("--max-shrinks", type=int, default=2, help="shrinks per failure signature")
    parser.add_argument("--disable", default="", help="comma-separated features: " + ", ".join(FEATURES))
    parser.add_argument("--verbose", action="store_true", help="print each program's id before it runs")
    args = parser.parse_args(argv)
    faulthandler.enable()
    disabled = frozenset(f for f in args.disable.split(",") if f)
    unknown = disabled - FEATURES.keys()
    if unknown:
        parser.error(f"unknown features {sorted(unknown)}; known: {', '.join(FEATURES)}")
    if args.program:
        seed, index = map(int, args.program.split(":"))
        prog = Generator(program_seed(seed, index), disabled).program()
        found, raised = run(prog)
        if found is None:
            print(script(prog, f", --program {args.program}"))
            print("# eager and traced runs agree")
            return 0
        small, small_found, small_raised = shrink(prog, found, raised, args.shrink_budget)
        print(report(seed, index, small, small_found, small_raised, disabled))
        return 1
    result = fuzz(args.programs, args.seed, args.stop_on_first, args.shrink_budget, disabled, args.max_shrinks,
                  verbose=args.verbose)
    raw = ", ".join(f"{' '.join(map(str, k))}: {v}" for k, v in sorted(result["raw"].items(), key=str))
    print(f"{result['programs']} programs in {result['seconds']:.1f} s; "
          f"{sum(result['raw'].values())} failed ({raw or 'none'}); "
          f"{len(result['failures'])} distinct after shrinking"
          + (f"; {result['skipped']} failures skipped (disabled features)" if result["skipped"] else ""))
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
