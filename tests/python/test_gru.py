"""encore.nn.GRU against Keras' GRU equations written in NumPy (keras/src/layers/rnn/gru.py:
gates z, r, h in the kernel, recurrent kernel and bias; reset_after with a (2, 3 units) bias),
float64 gradients, Bidirectional, return_state, and eager/traced equality."""

import numpy as np
import pytest

import encore
from encore import nn, optim

ACT = {
    "tanh": np.tanh,
    "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
    "relu": lambda v: np.maximum(v, 0),
    "hard_sigmoid": lambda v: np.clip(0.2 * v + 0.5, 0, 1),
    "linear": lambda v: v,
}


def keras_gru(x, kernel, recurrent_kernel, bias, activation="tanh", recurrent_activation="sigmoid",
              reset_after=True, go_backwards=False):
    """Keras' GRUCell.call, step by step: returns the states in processing order."""
    act, rec = ACT[activation], ACT[recurrent_activation]
    units = recurrent_kernel.shape[0]
    if reset_after:
        input_bias, recurrent_bias = bias[0], bias[1]
    else:
        input_bias, recurrent_bias = bias, np.zeros(3 * units)
    steps = x[:, ::-1] if go_backwards else x
    h = np.zeros((x.shape[0], units))
    states = []
    for t in range(x.shape[1]):
        matrix_x = steps[:, t] @ kernel + input_bias
        x_z, x_r, x_h = np.split(matrix_x, 3, axis=-1)
        if reset_after:
            matrix_inner = h @ recurrent_kernel + recurrent_bias
        else:
            matrix_inner = h @ recurrent_kernel[:, : 2 * units]
        recurrent_z, recurrent_r, recurrent_h = np.split(matrix_inner, [units, 2 * units], axis=-1)
        z = rec(x_z + recurrent_z)
        r = rec(x_r + recurrent_r)
        if reset_after:
            recurrent_h = r * recurrent_h
        else:
            recurrent_h = (r * h) @ recurrent_kernel[:, 2 * units:]
        hh = act(x_h + recurrent_h)
        h = z * h + (1 - z) * hh
        states.append(h)
    return np.stack(states, axis=1)


def set_weights(layer, seed):
    rng = np.random.default_rng(seed)
    weights = []
    with encore.no_grad():
        for _, p in layer.named_parameters():
            w = rng.uniform(-0.8, 0.8, size=p.shape)
            p.copy_(encore.from_numpy(w.astype(np.float32 if p.dtype == encore.float32 else np.float64)))
            weights.append(w)
    return weights


@pytest.mark.parametrize("reset_after", [True, False])
@pytest.mark.parametrize("go_backwards", [False, True])
@pytest.mark.parametrize("activation,recurrent_activation", [("tanh", "sigmoid"), ("relu", "hard_sigmoid")])
def test_gru_matches_keras_equations(reset_after, go_backwards, activation, recurrent_activation):
    x = np.random.default_rng(0).normal(size=(3, 6, 4))
    gru = nn.GRU(5, activation=activation, recurrent_activation=recurrent_activation, return_sequences=True,
                 return_state=True, go_backwards=go_backwards, reset_after=reset_after)
    gru.build(x.shape)
    gru.to("float64")
    kernel, recurrent_kernel, bias = set_weights(gru, 1)
    assert [n for n, _ in gru.named_parameters()] == ["kernel", "recurrent_kernel", "bias"]
    assert bias.shape == ((2, 15) if reset_after else (15,))
    y, h = gru(encore.from_numpy(x))
    want = keras_gru(x, kernel, recurrent_kernel, bias, activation, recurrent_activation, reset_after, go_backwards)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h.numpy(), want[:, -1], rtol=1e-12, atol=1e-12)
    last = nn.GRU(5, activation=activation, recurrent_activation=recurrent_activation, go_backwards=go_backwards,
                  reset_after=reset_after)
    last.build(x.shape)
    last.to("float64")
    set_weights(last, 1)
    np.testing.assert_allclose(last(encore.from_numpy(x)).numpy(), want[:, -1], rtol=1e-12, atol=1e-12)


def test_bidirectional_gru_matches_keras():
    x = np.random.default_rng(2).normal(size=(2, 5, 3))
    bi = nn.Bidirectional(nn.GRU(4, return_sequences=True))
    bi.build(x.shape)
    bi.to("float64")
    w = set_weights(bi, 3)
    assert [n for n, _ in bi.named_parameters()][::3] == ["forward_gru.kernel", "backward_gru.kernel"]
    forward = keras_gru(x, *w[:3])
    backward = keras_gru(x, *w[3:], go_backwards=True)[:, ::-1]  # Keras flips it back
    np.testing.assert_allclose(bi(encore.from_numpy(x)).numpy(), np.concatenate([forward, backward], -1),
                               rtol=1e-12, atol=1e-12)


def test_gru_gradients_float64():
    x = encore.from_numpy(np.random.default_rng(4).normal(size=(2, 4, 3)))
    for options in ({}, {"reset_after": False, "go_backwards": True, "activation": "relu"}):
        gru = nn.GRU(3, return_sequences=True, **options)
        gru.build(x.shape)
        gru.to("float64")
        set_weights(gru, 5)
        params = gru.parameters()
        kernel = params[0]

        def loss():
            return encore.sum(gru(x) * gru(x))

        for p in params:
            p.grad = None
        loss().backward()
        analytic = kernel.grad.numpy().copy()
        w = kernel.numpy()  # shares memory with the parameter
        numeric = np.zeros_like(w)
        for idx in np.ndindex(w.shape):
            saved = w[idx]
            w[idx] = saved + 1e-6
            plus = loss().item()
            w[idx] = saved - 1e-6
            minus = loss().item()
            w[idx] = saved
            numeric[idx] = (plus - minus) / 2e-6
        np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-7)


def test_gru_options_and_errors():
    x = encore.randn(4, 7, 6)
    gru = nn.GRU(3)
    assert gru(x).shape == (4, 3) and gru.units == 3 and not gru.uses_cudnn(x)
    assert isinstance(gru, nn.Recurrent)
    y, h = nn.GRU(3, return_sequences=True, return_state=True)(x)
    assert y.shape == (4, 7, 3) and h.shape == (4, 3)
    assert nn.Bidirectional(nn.GRU(2), merge_mode="sum")(x).shape == (4, 2)
    with pytest.raises(ValueError, match=r"\[gru\] implementation"):
        nn.GRU(3, implementation="fast")
    with pytest.raises(encore.UnsupportedError):
        nn.GRU(3, reset_after=False, implementation="cudnn")(x)
    with pytest.raises(encore.ShapeError, match=r"^\[gru\] input \(4, 7, 5\)"):
        gru(encore.randn(4, 7, 5))


def test_gru_training_step_eager_equals_traced():
    def run(traced):
        encore.manual_seed(7)
        model = nn.Sequential([nn.Bidirectional(nn.GRU(4, return_sequences=True)),
                               nn.GRU(3, reset_after=False), nn.Dense(1, activation="sigmoid")])
        model.build((3, 5, 2))
        adam = optim.Adam(model.parameters(), lr=1e-2)

        def step(x, y):
            adam.zero_grad()
            loss = nn.binary_crossentropy(y, model(x))
            loss.backward()
            adam.step()
            return loss

        fn = encore.trace(step) if traced else step
        rng = np.random.default_rng(8)
        losses = [fn(rng.normal(size=(3, 5, 2)).astype(np.float32),
                     (rng.uniform(size=(3, 1)) > 0.5).astype(np.float32)).numpy() for _ in range(3)]
        return losses + [p.numpy() for p in model.parameters()]

    for a, b in zip(run(False), run(True)):
        assert a.tobytes() == b.tobytes()
