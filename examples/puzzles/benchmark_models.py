"""The benchmark models of issue 12, as layer specs and as encore models: one definition for
the puzzles (p1_eager_vs_graph.py), bench_peers.py (which also builds them in PyTorch from the
same specs) and bench_recurrent.py. The C++ twin is benchmark_models.h.

  tiny    Dense(32, relu) -> GAP -> Dense(1) (compare_modes' tiny_dense: dispatch-bound)
  small   Conv1D(128, 40, strides 4, same) -> GAP -> Dropout -> Dense(64) -> Dense(1)
  medium  6 x Conv1D(f, 20) for f in 64 128 256 256 128 64 -> GAP -> Dense(256)
          -> Dropout -> Dense(128) -> Dense(64) -> Dense(1)
  large   Conv1D(64, 400, strides 4) -> Conv1D(128, 200) -> 40 x Conv1D(256, 12, same)
          -> Conv1D(512, 20, strides 2) -> Conv1D(1028, 10, strides 2) -> Conv1D(256, 1)
          -> GAP -> Dense(256) -> Dropout -> Dense(128) -> Dense(64) -> Dense(1)
  flatten Conv1D(128, 400, strides 4, same) -> Flatten -> Dropout -> Dense(64) -> Dense(1)
  bilstm  Bidirectional(LSTM(512, relu)) -> LSTM(512, relu) -> Conv1D(128, 400, strides 4,
          same) -> Flatten -> Dense(256) -> Dropout -> Dense(128) -> Dense(64) -> Dense(1)
  All: Adam(1e-4), binary cross-entropy, batch 32, channels-last (batch, steps, features);
  30 features, except tiny (8), flatten and bilstm (16, on 400 steps: the question's data).
"""

from __future__ import annotations

from encore import nn, optim

MODELS = ("tiny", "small", "medium", "large", "flatten", "bilstm")
FEATURES = {"tiny": 8, "flatten": 16, "bilstm": 16}
LEARNING_RATE = 1e-4


def features(model):
    return FEATURES.get(model, 30)


def conv(f, k, s=1, p="valid"):
    return ("conv", f, k, s, p)


def layers_of(model, units=512, cell="lstm"):
    """The model as a list of layer specs, shared by the encore and PyTorch builders; `units`
    and `cell` (lstm, gru) change the bilstm model's recurrent layers."""
    head = [("gap",), ("dense", 256, "relu"), ("dropout",), ("dense", 128, "relu"),
            ("dense", 64, "relu"), ("dense", 1, "sigmoid")]
    if model == "tiny":
        return [("dense", 32, "relu"), ("gap",), ("dense", 1, "sigmoid")]
    if model == "small":
        return [conv(128, 40, 4, "same"), ("gap",), ("dropout",), ("dense", 64, "relu"),
                ("dense", 1, "sigmoid")]
    if model == "medium":
        return [conv(f, 20) for f in (64, 128, 256, 256, 128, 64)] + head
    if model == "large":
        return ([conv(64, 400, 4), conv(128, 200)] + [conv(256, 12, 1, "same")] * 40 +
                [conv(512, 20, 2), conv(1028, 10, 2), conv(256, 1)] + head)
    if model == "flatten":
        return [conv(128, 400, 4, "same"), ("flatten",), ("dropout",), ("dense", 64, "relu"),
                ("dense", 1, "sigmoid")]
    if model == "bilstm":
        return [("bi" + cell, units), (cell, units), conv(128, 400, 4, "same"), ("flatten",),
                ("dense", 256, "relu"), ("dropout",), ("dense", 128, "relu"), ("dense", 64, "relu"),
                ("dense", 1, "sigmoid")]
    raise ValueError(f"unknown model {model!r} ({', '.join(MODELS)})")


def same_padding(length, k, s):
    out = -(-length // s)
    total = max((out - 1) * s + k - length, 0)
    return total // 2, total - total // 2


def step_flops(spec, shape):
    """Multiply-adds x 2 of a training step: each GEMM-like product three times (forward,
    gradient of its input, gradient of its weights), except the gradient of the model's input,
    which no step computes."""
    n, length, c = shape
    flops = 0
    for layer in spec:
        kind = layer[0]
        if kind == "conv":
            _, f, k, s, p = layer
            pl, pr = same_padding(length, k, s) if p == "same" else (0, 0)
            length = (length + pl + pr - k) // s + 1
            product = input_part = 2 * n * length * f * c * k
            c = f
        elif kind in ("lstm", "bilstm", "gru", "bigru"):
            dirs = 2 if kind.startswith("bi") else 1
            gates = 3 if kind.endswith("gru") else 4
            product = dirs * 2 * n * length * (c + layer[1]) * gates * layer[1]
            input_part = dirs * 2 * n * length * c * gates * layer[1]  # the input projection's
            c = dirs * layer[1]
        elif kind == "dense":
            product = input_part = 2 * n * length * c * layer[1]
            c = layer[1]
        else:
            if kind == "gap":
                length = 1
            elif kind == "flatten":
                c, length = c * length, 1
            continue
        flops += 3 * product - (input_part if flops == 0 else 0)
    return flops


def build_encore(spec):
    """An unbuilt nn.Sequential of the spec's layers."""
    mods = []
    for layer in spec:
        kind = layer[0]
        if kind == "conv":
            mods.append(nn.Conv1D(layer[1], layer[2], strides=layer[3], padding=layer[4]))
        elif kind == "dense":
            mods.append(nn.Dense(layer[1], activation=layer[2]))
        elif kind == "gap":
            mods.append(nn.GlobalAveragePooling1D())
        elif kind == "dropout":
            mods.append(nn.Dropout(0.5))
        elif kind == "flatten":
            mods.append(nn.Flatten())
        elif kind in ("lstm", "gru"):
            mods.append(_recurrent(kind, layer[1]))
        elif kind in ("bilstm", "bigru"):
            mods.append(nn.Bidirectional(_recurrent(kind[2:], layer[1])))
    return nn.Sequential(mods)


def _recurrent(cell, units):
    return (nn.LSTM if cell == "lstm" else nn.GRU)(units, activation="relu", return_sequences=True)


def build(model, shape, **spec_args):
    """The model named `model`, built for batches of `shape`, with its Adam(1e-4)."""
    net = build_encore(layers_of(model, **spec_args))
    net.build(shape)
    return net, optim.Adam(net.parameters(), lr=LEARNING_RATE)
