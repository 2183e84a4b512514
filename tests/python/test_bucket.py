"""Exact bucketing from Python: for every built-in layer and for small Conv1D, LSTM and BiLSTM
models, a bucketed traced call equals the eager call on the unpadded input over random
lengths, forward and training (parameters after several steps); the true length is data (one
trace per bucket); what cannot be exact is refused at trace time, naming the op."""

import numpy as np
import pytest

import encore
from encore import nn, optim

BUCKETS = encore.bucket(1, [12, 20, 32])


def stacked_convs():
    return nn.Sequential([nn.Conv1D(4, 3, padding="same", activation="relu"), nn.Conv1D(4, 3, padding="same"),
                          nn.Conv1D(3, 2), nn.Conv1D(3, 3, padding="causal", dilation_rate=2)])


LAYERS = {
    "dense": lambda: nn.Dense(5, activation="relu"),
    "conv1d_valid": lambda: nn.Conv1D(4, 3),
    "conv1d_same": lambda: nn.Conv1D(4, 3, padding="same"),
    "conv1d_causal": lambda: nn.Conv1D(4, 3, padding="causal"),
    "conv1d_same_strided": lambda: nn.Conv1D(4, 4, strides=3, padding="same"),
    "conv1d_stacked": stacked_convs,
    "max_pooling": lambda: nn.MaxPooling1D(2),
    "average_pooling": lambda: nn.AveragePooling1D(3, strides=2),
    "global_average_pooling": lambda: nn.GlobalAveragePooling1D(),
    "global_max_pooling": lambda: nn.GlobalMaxPooling1D(),
    "lstm_last_state": lambda: nn.LSTM(6),
    "lstm_reverse_sequences": lambda: nn.LSTM(6, return_sequences=True, reverse=True),
    "gru_backwards": lambda: nn.GRU(5, return_sequences=True, go_backwards=True),
    "bidirectional_lstm": lambda: nn.Bidirectional(nn.LSTM(6)),
    "bidirectional_gru": lambda: nn.Bidirectional(nn.GRU(5, return_sequences=True)),
    "dropout": lambda: nn.Dropout(0.5),
    "batch_normalization": lambda: nn.BatchNormalization(),
    "layer_normalization": lambda: nn.LayerNormalization(),
    "embedding": lambda: nn.Embedding(10, 4),
}


def built(name):
    encore.manual_seed(1)
    layer = LAYERS[name]()
    layer.build((2, 9) if name == "embedding" else (2, 9, 3))
    return layer


def batch(name, length, rng):
    if name == "embedding":
        return encore.tensor(rng.integers(0, 10, size=(2, length)).astype(np.int64))
    return encore.tensor(rng.standard_normal((2, length, 3)).astype(np.float32))


def lengths(seed):
    return [int(n) for n in np.random.default_rng(seed).integers(5, 33, size=20)]


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_forward_and_training_equal_eager(name):
    rng = np.random.default_rng(0)
    layer = built(name)
    layer.eval()
    f = encore.trace(lambda x: layer(x), shapes=BUCKETS)
    for n in lengths(1):
        x = batch(name, n, rng)
        np.testing.assert_allclose(f(x).numpy(), layer(x).numpy(), rtol=1e-5, atol=1e-5)
    assert f.stats["traces"] == 3 and f.stats["retraces_saved"] > 0

    if not layer.parameters():
        return
    eager, traced = built(name), built(name)
    if name == "dropout":
        eager.eval(), traced.eval()

    def step_of(model, opt):
        def step(x):
            opt.zero_grad()
            y = model(x)
            loss = nn.mean_squared_error(encore.full_like(y, 0.5), y)
            loss.backward()
            opt.step()
            return loss
        return step

    eager_step = step_of(eager, optim.SGD(eager.parameters(), lr=0.1))
    traced_step = encore.trace(step_of(traced, optim.SGD(traced.parameters(), lr=0.1)), shapes=BUCKETS)
    for n in lengths(2):
        x = batch(name, n, rng)
        np.testing.assert_allclose(traced_step(x).numpy(), eager_step(x).numpy(), rtol=1e-5, atol=1e-5)
    assert traced_step.stats["traces"] == 3
    for p, q in zip(traced.parameters(), eager.parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-4, atol=1e-4)


def model_of(kind):
    encore.manual_seed(3)
    if kind == "conv1d":
        dropout = nn.Dropout(0.5)
        dropout.eval()  # a bucketed dropout draws over the padded shape
        layers = [nn.Conv1D(8, 5, strides=2, padding="same"), nn.GlobalAveragePooling1D(), dropout,
                  nn.Dense(4, activation="relu")]
    elif kind == "lstm":
        layers = [nn.LSTM(8)]
    else:
        layers = [nn.Bidirectional(nn.LSTM(8))]
    model = nn.Sequential(layers + [nn.Dense(1, activation="sigmoid")])
    model.build((4, 9, 3))
    return model


@pytest.mark.parametrize("kind", ["conv1d", "lstm", "bilstm"])
def test_models_train_as_eager(kind):
    eager, traced = model_of(kind), model_of(kind)

    def step_of(model, opt):
        def step(x, y):
            opt.zero_grad()
            loss = nn.binary_crossentropy(y, model(x))
            loss.backward()
            opt.step()
            return loss
        return step

    eager_step = step_of(eager, optim.Adam(eager.parameters(), lr=1e-2))
    traced_step = encore.trace(step_of(traced, optim.Adam(traced.parameters(), lr=1e-2)), shapes=BUCKETS)
    rng = np.random.default_rng(4)
    y = encore.tensor((rng.random((4, 1)) > 0.5).astype(np.float32))
    for n in lengths(5):
        x = encore.tensor(rng.standard_normal((4, n, 3)).astype(np.float32))
        np.testing.assert_allclose(traced_step(x, y).numpy(), eager_step(x, y).numpy(), rtol=1e-5, atol=1e-5)
    stats = traced_step.stats
    assert stats["traces"] == 3 and stats["retraces_saved"] > 0 and stats["padding_elements"] > 0
    for p, q in zip(traced.parameters(), eager.parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-4, atol=1e-4)


def test_what_cannot_be_exact_is_refused_naming_the_op():
    flat = nn.Sequential([nn.Flatten(), nn.Dense(2)])
    flat.build((2, 9, 3))
    f = encore.trace(lambda x: flat(x), shapes=BUCKETS)
    with pytest.raises(ValueError, match=r"\[flatten\] cannot be exact under a bucket policy: it flattens"):
        f(encore.randn(2, 9, 3))
    sums = encore.trace(lambda x: encore.sum(x, 1), shapes=BUCKETS, name="sums")
    with pytest.raises(ValueError, match=r"of 'sums' cannot be exact: output 0 \(made by sum\)"):
        sums(encore.randn(2, 9, 3))


def test_reverse_and_mask_sequence():
    x = encore.tensor(np.arange(1, 9, dtype=np.float32).reshape(2, 4))
    lengths = encore.tensor(np.array([3, 1], dtype=np.int64))
    np.testing.assert_array_equal(encore.reverse_sequence(x, lengths).numpy(), [[3, 2, 1, 4], [5, 6, 7, 8]])
    np.testing.assert_array_equal(encore.mask_sequence(x, lengths, value=-1.0).numpy(),
                                  [[1, 2, 3, -1], [5, -1, -1, -1]])


class Scale(nn.Module):
    """A per-step layer of the user's: no bucketing rule, so its output is not registered."""

    def forward(self, x):
        return x * 2.0


def sequences_lstm():
    encore.manual_seed(21)
    lstm = nn.LSTM(4, return_sequences=True)
    lstm.build((2, 9, 3))
    return lstm


def test_the_issues_minimal_case_is_refused_not_10_12_of_eager():
    m = nn.Sequential([nn.LSTM(4, return_sequences=True), Scale(), nn.GlobalAveragePooling1D()])
    m.build((2, 9, 3))
    f = encore.trace(lambda x: m(x), shapes=encore.bucket(1, [12]), name="f")
    with pytest.raises(ValueError, match=r"of 'f' cannot be exact: output 0 \(made by .*\) changes with the padding"):
        f(encore.randn(2, 7, 3))
    with pytest.raises(ValueError, match="cannot be exact"):  # nothing cached: every call of the bucket refuses
        f(encore.randn(2, 10, 3))


READS_OF_PADDING = {
    "mean over the steps": lambda lstm: lambda x: encore.mean(lstm(x), 1),
    "max over the steps": lambda lstm: lambda x: encore.max(lstm(x), 1),
    "softmax over the steps": lambda lstm: lambda x: encore.softmax(lstm(x), 1),
    "last step": lambda lstm: lambda x: lstm(x)[:, -1],
    "loss on the last step": lambda lstm: lambda x: nn.mean_squared_error(encore.zeros(2, 4), lstm(x)[:, -1]),
    "count of the steps": lambda lstm: lambda x: encore.sum(x * 0.0 + 1.0, 1),
}


@pytest.mark.parametrize("case", sorted(READS_OF_PADDING))
def test_reads_of_padding_downstream_of_a_masking_layer_are_refused(case):
    f = encore.trace(READS_OF_PADDING[case](sequences_lstm()), shapes=encore.bucket(1, [12]), name="f")
    with pytest.raises(ValueError, match="of 'f' cannot be exact"):
        f(encore.randn(2, 7, 3))


def test_a_same_conv_followed_by_a_read_of_its_last_step_is_refused():
    encore.manual_seed(22)
    conv = nn.Conv1D(3, 3, padding="same")
    conv.build((2, 9, 3))
    f = encore.trace(lambda x: conv(x)[:, -1], shapes=encore.bucket(1, [12]))
    with pytest.raises(ValueError, match="cannot be exact"):
        f(encore.randn(2, 7, 3))


def test_the_retrace_warning_does_not_suggest_a_bucket_for_a_mean_over_masked_steps():
    lstm = sequences_lstm()
    f = encore.trace(lambda x: encore.mean(lstm(x), 1), retrace_warning=2)
    with pytest.warns(encore.RetraceWarning) as warned:
        for n in (8, 9, 10):
            f(encore.randn(2, n, 3))
    text = " ".join(str(w.message) for w in warned)
    assert "would not be exact for this function" in text and "is exact for this function" not in text


def error_of(call):
    try:
        call()
    except Exception as e:  # noqa: BLE001 (the type and message are compared)
        return type(e), str(e)
    return None


@pytest.mark.parametrize("layer", ["max_pooling", "valid_conv"])
def test_calls_eager_refuses_are_refused_with_eagers_error(layer):
    encore.manual_seed(23)
    m = nn.MaxPooling1D(3) if layer == "max_pooling" else nn.Conv1D(2, 4)
    m.build((2, 9, 3))
    f = encore.trace(lambda x: m(x), shapes=encore.bucket(1, [8]))
    f(encore.randn(2, 7, 3))
    for n in (2, 0):
        x = encore.randn(2, n, 3)
        eager = error_of(lambda: m(x))
        assert eager is not None
        assert error_of(lambda: f(x)) == eager
    x = encore.randn(2, 5, 3)
    np.testing.assert_allclose(f(x).numpy(), m(x).numpy(), rtol=1e-5, atol=1e-5)
    assert f.stats["traces"] == 1


def test_aliased_outputs_fed_back_are_read_from_a_copy():
    # An LSTM cell: c is read after the gate pre-activations, which the memory plan places where
    # the outputs go; fed back in place, it was overwritten from the third call on.
    w = encore.randn(3, 12)

    def cell(x, h, c):
        z = h @ w + x
        i, f = encore.sigmoid(z[:, :3]), encore.sigmoid(z[:, 3:6])
        g, o = encore.tanh(z[:, 6:9]), encore.sigmoid(z[:, 9:])
        c2 = f * c + i * g
        return o * encore.tanh(c2), c2

    traced = encore.trace(cell, alias_outputs=True)
    h_eager = c_eager = h_traced = c_traced = encore.zeros(2, 3)
    for i in range(6):
        x = encore.randn(2, 12)
        h_eager, c_eager = cell(x, h_eager, c_eager)
        h_traced, c_traced = traced(x, h_traced, c_traced)
        np.testing.assert_array_equal(h_traced.numpy(), h_eager.numpy(), err_msg=f"call {i + 1}")
        np.testing.assert_array_equal(c_traced.numpy(), c_eager.numpy(), err_msg=f"call {i + 1}")
