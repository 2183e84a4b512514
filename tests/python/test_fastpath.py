"""conv1d and conv1d_fused in float32 (oneDNN: forward, backward data, backward weights; every
autotune policy; channels-last and blocked layouts), from Python, against a float64 NumPy
reference, on random configurations: strides, dilations, paddings ('valid', 'same', 'causal',
an int, asymmetric pairs), lengths near the kernel's span, odd channel counts, batch 1 and 0.
The tolerance is the float32 bound of tests/cpp/fastpath.h: each element within 2 u (n + 4)
times the sum of the absolute values of its n terms. The C++ suite (tests/cpp/test_fastpath_*)
covers the other fast paths. ENCORE_FASTPATH_CONFIGS (default 1100, of which this file runs
14%), ENCORE_FASTPATH_SEED and ENCORE_FASTPATH_ONLY work as there."""

import os

import numpy as np
import pytest

import encore

U = 2.0**-24
SEED = int(os.environ.get("ENCORE_FASTPATH_SEED", "1"))
ONLY = os.environ.get("ENCORE_FASTPATH_ONLY")
COUNT = max(1, round(0.14 * int(os.environ.get("ENCORE_FASTPATH_CONFIGS", "1100"))))
ACTIVATIONS = ["linear", "relu", "tanh", "sigmoid", "hard_sigmoid"]


def pads(length, kernel, stride, dilation, padding):
    """Keras' padding, worked out here rather than by encore."""
    span = (kernel - 1) * dilation + 1
    if padding == "valid":
        return 0, 0
    if padding == "causal":
        return span - 1, 0
    if padding == "same":
        out = -(-length // stride)
        total = max((out - 1) * stride + span - length, 0)
        return total // 2, total - total // 2
    return (padding, padding) if isinstance(padding, int) else padding


def activate(name, z):
    return {"linear": z, "relu": np.maximum(z, 0), "tanh": np.tanh(z), "sigmoid": 1 / (1 + np.exp(-z)),
            "hard_sigmoid": np.clip(0.2 * z + 0.5, 0, 1)}[name]


def activation_grad(name, g, y):
    """The derivative as encore's backward takes it: from the output it computed."""
    return {"linear": g, "relu": np.where(y > 0, g, 0), "tanh": g * (1 - y * y), "sigmoid": g * (y * (1 - y)),
            "hard_sigmoid": np.where((y > 0) & (y < 1), 0.2 * g, 0)}[name]


def reference(x, w, b, g, y_got, stride, dilation, pad, activation):
    """(value, bound) of y, grad x, grad w and grad b in float64."""
    n, length, channels = x.shape
    kernel, _, filters = w.shape
    xp = np.pad(x, ((0, 0), pad, (0, 0)))
    out = (xp.shape[1] - (kernel - 1) * dilation - 1) // stride + 1
    index = np.arange(out)[:, None] * stride + np.arange(kernel)[None, :] * dilation  # (T, K)
    patches = xp[:, index]  # (N, T, K, C)
    pre = np.einsum("ntkc,kcf->ntf", patches, w) + (b if b is not None else 0)
    mag = np.einsum("ntkc,kcf->ntf", np.abs(patches), np.abs(w)) + (np.abs(b) if b is not None else 0)
    y = activate(activation, pre)
    lip = {"sigmoid": 0.25, "hard_sigmoid": 0.2}.get(activation, 1.0)
    y_bound = lip * 2 * U * (kernel * channels + 5) * mag + (0 if activation == "linear" else 16 * U * (np.abs(y) + U))
    gy = activation_grad(activation, g, y_got)
    # encore computes the activation's derivative in float32 from its float32 output: tanh's
    # 1 - y * y cancels where |y| is near 1, an absolute error of a few u |g| that no relative
    # bound on the sums covers. Each term's share of it is carried beside the sums' bound.
    gy_err = 4 * U * np.abs(g) if activation in ("tanh", "sigmoid") else np.zeros_like(g)
    gxp = np.zeros_like(xp)
    gxp_mag = np.zeros_like(xp)
    gxp_err = np.zeros_like(xp)
    np.add.at(gxp, (slice(None), index), np.einsum("ntf,kcf->ntkc", gy, w))
    np.add.at(gxp_mag, (slice(None), index), np.einsum("ntf,kcf->ntkc", np.abs(gy), np.abs(w)))
    np.add.at(gxp_err, (slice(None), index), np.einsum("ntf,kcf->ntkc", gy_err, np.abs(w)))
    crop = slice(pad[0], pad[0] + length)
    gx, gx_mag, gx_err = gxp[:, crop], gxp_mag[:, crop], gxp_err[:, crop]
    gw = np.einsum("ntkc,ntf->kcf", patches, gy)
    gw_mag = np.einsum("ntkc,ntf->kcf", np.abs(patches), np.abs(gy))
    gw_err = np.einsum("ntkc,ntf->kcf", np.abs(patches), gy_err)
    bound = lambda mag, terms: 2 * U * (terms + 4) * mag  # noqa: E731
    return [(y, y_bound), (gx, bound(gx_mag, kernel * filters) + 1.01 * gx_err),
            (gw, bound(gw_mag, n * out) + 1.01 * gw_err),
            (gy.sum(axis=(0, 1)), bound(np.abs(gy).sum(axis=(0, 1)), n * out) + 1.01 * gy_err.sum(axis=(0, 1)))]


def random_case(rng, i):
    while True:
        hard = rng.random() < 1 / 6  # where oneDNN's AVX-512 weight gradient goes wrong (known_wrong)
        kernel = int(rng.integers(1, 9 if hard else 7))
        dilation = int(rng.integers(3, 9)) if hard else (1 if rng.random() < 0.6 else int(rng.integers(2, 5)))
        stride = int(rng.integers(2, 5)) if hard else (1 if rng.random() < 0.4 else int(rng.integers(2, 6)))
        span = (kernel - 1) * dilation + 1
        if hard:
            length = int(rng.integers(60, 151))
        elif rng.random() < 0.3:
            length = max(1, span + int(rng.integers(-3, 4)))
        else:
            length = int(rng.integers(1, 41))
        most = 28 if hard else span
        padding = ["valid", "same", "causal", int(rng.integers(0, most + 1)),
                   (int(rng.integers(15 if hard else 0, most + 1)), int(rng.integers(0, most + 1)))][rng.integers(0, 5)]
        pad = pads(length, kernel, stride, dilation, padding)
        if length + pad[0] + pad[1] >= span:
            break
    return dict(n=0 if rng.random() < 0.05 else (1 if rng.random() < 0.4 else int(rng.integers(2, 5))),
                length=length, channels=int(rng.integers(1, 41)), filters=int(rng.integers(1, 34)), kernel=kernel,
                stride=stride, dilation=dilation, padding=padding,
                activation=str(rng.choice(ACTIVATIONS)) if rng.random() < 0.3 else None,
                policy=["heuristic", "exhaustive", "off"][i % 3],
                layout="blocked" if rng.random() < 0.25 else "native")


def check(case, rng):
    n, length, channels, filters, kernel = (case[k] for k in ("n", "length", "channels", "filters", "kernel"))
    f32 = lambda *shape: rng.uniform(-1, 1, shape).astype(np.float32)  # noqa: E731
    x, w, b = f32(n, length, channels), f32(kernel, channels, filters), f32(filters)
    xt, wt, bt = (encore.tensor(a, requires_grad=True) for a in (x, w, b))
    fused = case["activation"] is not None
    args = dict(stride=case["stride"], padding=case["padding"], dilation=case["dilation"])
    if fused:
        y = encore.conv1d_fused(xt, wt, bt, activation=case["activation"], **args)
    else:
        y = encore.conv1d(xt, wt, **args)
    g = f32(*y.shape)
    y.backward(encore.tensor(g))
    pad = pads(length, kernel, case["stride"], case["dilation"], case["padding"])
    want = reference(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64) if fused else None,
                     g.astype(np.float64), y.numpy().astype(np.float64), case["stride"], case["dilation"], pad,
                     case["activation"] or "linear")
    got = [y.numpy(), xt.grad.numpy(), wt.grad.numpy()] + ([bt.grad.numpy()] if fused else [])
    for name, value, (ref, bound) in zip(["y", "grad x", "grad w", "grad b"], got, want):
        assert value.shape == ref.shape, f"{name}: shape {value.shape}, the reference {ref.shape}"
        err = np.abs(value.astype(np.float64) - ref)
        bad = ~(err <= bound)
        if bad.any():
            at = np.unravel_index(np.argmax(np.where(bad, err / np.maximum(bound, 1e-300), 0)), err.shape)
            return f"{name}{list(at)} = {value[at]}, the reference {ref[at]} +- {bound[at]}"
    return ""


@pytest.fixture
def settings():
    policy, layout = encore.autotune.policy(), encore.autotune.conv1d_layout()
    yield
    encore.autotune.set_policy(policy)
    encore.autotune.set_conv1d_layout(layout)
    encore.autotune.clear()


def test_conv1d_against_numpy(settings):
    failures = []
    for i in [int(ONLY)] if ONLY else range(COUNT):
        rng = np.random.default_rng([SEED, i])
        case = random_case(rng, i)
        encore.autotune.clear()
        encore.autotune.set_policy(case["policy"])
        encore.autotune.set_conv1d_layout(case["layout"])
        what = check(case, rng)
        if what:
            failures.append(f"ENCORE_FASTPATH_SEED={SEED} ENCORE_FASTPATH_ONLY={i}: {case}: {what}")
            if len(failures) >= 5:
                break
    assert not failures, "\n".join(failures)


def test_reported_weight_gradient(settings):
    """Issue #24: x (6, 70, 39), w (8, 39, 2), stride 3, padding (23, 23), dilation 4 gave a weight
    gradient 126% off under the default (heuristic) policy."""
    rng = np.random.default_rng(24)
    case = dict(n=6, length=70, channels=39, filters=2, kernel=8, stride=3, dilation=4, padding=(23, 23),
                activation=None, policy="heuristic", layout="native")
    encore.autotune.clear()
    encore.autotune.set_policy("heuristic")
    assert check(case, rng) == ""
