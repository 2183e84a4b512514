"""A Python training loop learns, eagerly and traced, with bitwise equal results on the CPU."""

import numpy as np
import pytest

import encore
from encore import nn, optim


def make_data(n, steps=16, channels=4, seed=0):
    """Label 1 when the first channel's mean is positive, under noise on every channel."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, steps, channels)).astype(np.float32)
    shift = rng.choice([-0.5, 0.5], size=n).astype(np.float32)
    x[:, :, 0] += shift[:, None]
    y = (shift > 0).astype(np.float32)[:, None]
    return x, y


def build_model():
    return nn.Sequential([
        nn.Conv1D(8, 3, padding="same", activation="relu"),
        nn.GlobalAveragePooling1D(),
        nn.Dropout(0.2),
        nn.Dense(8, activation="relu"),
        nn.Dense(1, activation="sigmoid"),
    ])


def train(traced, epochs=3, batch=32, optimizer="adam"):
    encore.manual_seed(0)
    model = build_model()
    model.build((batch, 16, 4))
    params = model.parameters()
    opt = optim.Adam(params, lr=0.01) if optimizer == "adam" else optim.SGD(params, lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = nn.binary_crossentropy(y, model(x))
        loss.backward()
        opt.step()
        return loss

    run = encore.trace(step, name="train_step") if traced else step
    x, y = make_data(512)
    losses = []
    for _ in range(epochs):
        for i in range(0, len(x), batch):
            losses.append(run(x[i:i + batch], y[i:i + batch]).item())
    if traced:
        assert run.stats["traces"] == 1 and run.stats["hits"] == len(losses) - 1
    xt, yt = make_data(256, seed=1)
    with encore.training(False), encore.no_grad():
        accuracy = nn.binary_accuracy(encore.tensor(yt), model(xt))
    return losses, accuracy, [p.numpy().copy() for p in params], [p.grad.numpy().copy() for p in params]


@pytest.fixture(scope="module")
def eager_run():
    return train(traced=False)


def test_eager_training_learns(eager_run):
    losses, accuracy, _, _ = eager_run
    assert np.mean(losses[-8:]) < 0.6 * np.mean(losses[:8])
    assert accuracy > 0.85


def test_traced_training_matches_eager_bitwise(eager_run):
    losses, accuracy, params, grads = train(traced=True)
    e_losses, e_accuracy, e_params, e_grads = eager_run
    assert losses == e_losses
    assert accuracy == e_accuracy
    for a, b in zip(params, e_params):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(grads, e_grads):
        np.testing.assert_array_equal(a, b)


def test_sgd_momentum_eager_and_traced_agree():
    eager = train(traced=False, epochs=1, optimizer="sgd")
    traced = train(traced=True, epochs=1, optimizer="sgd")
    assert eager[0] == traced[0]
    for a, b in zip(eager[2], traced[2]):
        np.testing.assert_array_equal(a, b)


def test_learning_rate_change_reaches_replays():
    w = encore.tensor([1.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.1)

    @encore.trace
    def step(x):
        opt.zero_grad()
        loss = (w * x).sum()
        loss.backward()
        opt.step()
        return loss

    x = encore.ones(1)
    step(x)
    np.testing.assert_allclose(w.item(), 0.9, rtol=1e-6)
    opt.lr = 0.5
    step(x)
    np.testing.assert_allclose(w.item(), 0.4, rtol=1e-6)
    assert step.stats["traces"] == 1
