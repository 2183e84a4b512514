"""The Keras layers, activations and losses of issue 9 against NumPy reference implementations
of Keras' definitions (TensorFlow is not installed): AveragePooling1D, GlobalMaxPooling1D,
BatchNormalization (training, inference, the moving statistics, inside a traced step),
LayerNormalization, Embedding, gelu and softmax activations, categorical_crossentropy and
sparse_categorical_crossentropy; and their errors on hostile input."""

import math

import numpy as np
import pytest

import encore
from encore import nn, optim


def rng(seed=0):
    return np.random.default_rng(seed)


# ---- pools ----------------------------------------------------------------------------------

def keras_average_pool(x, pool, stride, padding):
    """TensorFlow's avg_pool1d: 'same' gives ceil(steps / stride) windows, and each averages the
    real steps it covers (the padding is not counted)."""
    steps = x.shape[1]
    if padding == "valid":
        return np.stack([x[:, s:s + pool].mean(axis=1) for s in range(0, steps - pool + 1, stride)], axis=1)
    out = -(-steps // stride)
    left = max((out - 1) * stride + pool - steps, 0) // 2
    return np.stack([x[:, max(t * stride - left, 0):min(t * stride - left + pool, steps)].mean(axis=1)
                     for t in range(out)], axis=1)


@pytest.mark.parametrize("pool,strides,padding", [(2, None, "valid"), (3, 1, "valid"), (3, 2, "same"),
                                                  (4, 3, "same"), (5, 2, "same"), (1, 1, "same"), (4, 1, "same")])
def test_average_pooling1d_matches_keras(pool, strides, padding):
    x = rng(pool).standard_normal((2, 11, 3))
    want = keras_average_pool(x, pool, strides or pool, padding)
    layer = nn.AveragePooling1D(pool, strides=strides, padding=padding)
    assert layer.build((2, 11, 3)) == want.shape
    np.testing.assert_allclose(layer(encore.tensor(x)).numpy(), want, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(encore.avg_pool1d(x.astype(np.float32), pool, strides, padding).numpy(), want,
                               rtol=1e-5, atol=1e-6)


def test_average_pool_same_edges_average_only_real_steps():
    x = encore.tensor([[[2.0], [4.0], [6.0]]], requires_grad=True)
    y = encore.avg_pool1d(x, pool_size=2, strides=1, padding="same")  # windows 2|4, 4|6, 6|pad
    assert y.reshape(3).tolist() == [3.0, 5.0, 6.0]
    y.sum().backward()
    assert x.grad.reshape(3).tolist() == [0.5, 1.0, 1.5]


def test_global_max_pooling1d_is_keras():
    x = rng(1).standard_normal((3, 5, 2))
    layer = nn.GlobalMaxPooling1D()
    np.testing.assert_array_equal(layer(encore.tensor(x)).numpy(), x.max(axis=1))
    np.testing.assert_allclose(nn.GlobalAveragePooling1D()(encore.tensor(x)).numpy(), x.mean(axis=1), rtol=1e-14)


# ---- BatchNormalization ---------------------------------------------------------------------

class KerasBatchNorm:
    """Keras' BatchNormalization in NumPy (axis=-1): the batch mean and biased variance normalize
    the batch and update the moving statistics."""

    def __init__(self, channels, momentum=0.99, epsilon=1e-3):
        self.mean, self.var = np.zeros(channels), np.ones(channels)
        self.gamma, self.beta = np.ones(channels), np.zeros(channels)
        self.momentum, self.epsilon = momentum, epsilon

    def __call__(self, x, training):
        axes = tuple(range(x.ndim - 1))
        if training:
            mean, var = x.mean(axis=axes), x.var(axis=axes)  # ddof=0: biased
            self.mean = self.mean * self.momentum + mean * (1 - self.momentum)
            self.var = self.var * self.momentum + var * (1 - self.momentum)
        else:
            mean, var = self.mean, self.var
        return (x - mean) / np.sqrt(var + self.epsilon) * self.gamma + self.beta


@pytest.mark.parametrize("shape", [(8, 3), (4, 6, 3)])
def test_batch_normalization_training_and_inference_match_keras(shape):
    ref = KerasBatchNorm(3, momentum=0.9)
    layer = nn.BatchNormalization(momentum=0.9)
    layer.build(shape)
    layer.to("float64")
    r = rng(2)
    for _step in range(4):
        x = r.standard_normal(shape) * 3 + 1
        np.testing.assert_allclose(layer(encore.tensor(x)).numpy(), ref(x, training=True), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(layer.moving_mean.numpy(), ref.mean, rtol=1e-12)
        np.testing.assert_allclose(layer.moving_variance.numpy(), ref.var, rtol=1e-12)
    x = r.standard_normal(shape)
    with encore.training(False):
        np.testing.assert_allclose(layer(encore.tensor(x)).numpy(), ref(x, training=False), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(layer.moving_mean.numpy(), ref.mean, rtol=1e-12)  # inference does not update
    names = [n for n, _ in layer.named_parameters()]
    assert names == ["gamma", "beta"] and [n for n, _ in layer.named_buffers()] == ["moving_mean", "moving_variance"]
    assert [n for n, _ in layer.named_weights()] == names + ["moving_mean", "moving_variance"]
    assert not layer.moving_mean.requires_grad


def test_batch_normalization_moving_variance_is_biased():
    # One batch of two values 0 and 2: biased variance 1, unbiased 2.
    layer = nn.BatchNormalization(momentum=0.0)
    layer(encore.tensor([[0.0], [2.0]]))
    assert layer.moving_mean.tolist() == [1.0] and layer.moving_variance.tolist() == [1.0]


def test_batch_normalization_options_and_gradient():
    layer = nn.BatchNormalization(axis=1, center=False, scale=False, epsilon=0.01)
    layer.build((5, 2, 4))
    layer.to("float64")
    x = encore.tensor(rng(3).standard_normal((5, 2, 4)), requires_grad=True)
    y = layer(x)
    assert layer.parameters() == [] and layer.moving_mean.shape == (2,)
    xn = x.detach().numpy()
    mean, var = xn.mean(axis=(0, 2), keepdims=True), xn.var(axis=(0, 2), keepdims=True)
    np.testing.assert_allclose(y.numpy(), (xn - mean) / np.sqrt(var + 0.01), rtol=1e-10)
    # The batch statistics are differentiated through: the sum of a normalized batch is constant.
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 0, atol=1e-12)


def make_bn_model(seed):
    encore.manual_seed(seed)
    model = nn.Sequential([nn.Conv1D(4, 3, padding="same"), nn.BatchNormalization(momentum=0.9),
                           nn.Activation("gelu"), nn.GlobalAveragePooling1D(), nn.Dense(3)])
    model.build((6, 10, 2))
    return model, optim.Adam(model.parameters(), lr=0.01)


def test_batch_normalization_traced_training_is_bitwise_eager_over_many_steps():
    runs = []
    for traced in (False, True):
        model, adam = make_bn_model(4)

        def step(x, y):
            adam.zero_grad()
            loss = nn.sparse_categorical_crossentropy(y, model(x), from_logits=True)
            loss.backward()
            adam.step()
            return loss

        f = encore.trace(step) if traced else step
        r = rng(5)
        losses = []
        for _ in range(30):
            x = encore.tensor(r.standard_normal((6, 10, 2)).astype(np.float32))
            y = encore.tensor(r.integers(0, 3, 6))
            losses.append(f(x, y).item())
        if traced:
            assert f.stats["traces"] == 1 and f.stats["calls"] == 30
        runs.append((losses, [w.numpy().copy() for _, w in model.named_weights()]))
    (e_losses, e_weights), (t_losses, t_weights) = runs
    assert e_losses == t_losses
    for e, t in zip(e_weights, t_weights):
        np.testing.assert_array_equal(e, t)
    bn = [w for (n, _), w in zip(model.named_weights(), t_weights) if n.endswith("moving_mean")][0]
    assert np.abs(bn).max() > 0  # the moving statistics did move


def test_batch_normalization_switching_modes_never_replays_a_stale_graph():
    model, _ = make_bn_model(6)
    eager_model, _ = make_bn_model(6)
    forward = encore.trace(lambda x: model(x))
    x = encore.tensor(rng(7).standard_normal((6, 10, 2)).astype(np.float32))
    for training in (True, False, True, True, False, False, True):
        with encore.training(training):
            got = forward(x).numpy()
            want = eager_model(x).numpy()
        np.testing.assert_array_equal(got, want)
        for (_, a), (_, b) in zip(model.named_buffers(), eager_model.named_buffers()):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert forward.stats["traces"] == 2  # one per mode, then replays


def test_batch_normalization_buffers_follow_dtype_and_checkpoints(tmp_path):
    layer = nn.BatchNormalization()
    layer(encore.tensor(rng(8).standard_normal((4, 3)).astype(np.float32)))
    layer.to("float64")
    assert layer.moving_mean.dtype == encore.float64
    nn.save(layer, tmp_path / "bn.safetensors")
    other = nn.BatchNormalization()
    other.build((4, 3))
    other.to("float64")
    nn.load(other, tmp_path / "bn.safetensors")
    np.testing.assert_array_equal(other.moving_variance.numpy(), layer.moving_variance.numpy())


def test_batch_normalization_errors():
    layer = nn.BatchNormalization()
    layer.build((2, 3))
    with pytest.raises(encore.ShapeError, match=r"^\[batch_normalization\] input \(2, 4\) has 4 channels on axis -1 "
                                                r"but the layer was built for 3"):
        layer(encore.zeros(2, 4))
    with pytest.raises(encore.DTypeError, match=r"^\[batch_normalization\] expects floating input"):
        layer(encore.zeros(2, 3, dtype=encore.int64))
    with pytest.raises(ValueError, match=r"^\[batch_normalization\] cannot take batch statistics of the empty "
                                         r"input \(0, 3\) in training mode"):
        layer(encore.zeros(0, 3))
    with encore.training(False):
        assert layer(encore.zeros(0, 3)).shape == (0, 3)
    with pytest.raises(encore.ShapeError, match=r"^\[batch_normalization\] expects input with a channels axis"):
        nn.BatchNormalization().build(())
    with pytest.raises(ValueError, match=r"^\[batch_normalization\] epsilon must be > 0"):
        nn.BatchNormalization(epsilon=0)
    message = r"^\[batch_norm\] mean \(2,\) float32 on cpu must be \(3,\) for axis 1"
    with pytest.raises(encore.ShapeError, match=message):
        encore.batch_norm(encore.zeros(4, 3), encore.zeros(2), encore.ones(3))


# ---- LayerNormalization ---------------------------------------------------------------------

@pytest.mark.parametrize("center,scale", [(True, True), (False, True), (False, False)])
def test_layer_normalization_matches_keras(center, scale):
    x = rng(9).standard_normal((3, 4, 5)) * 2 + 0.5
    layer = nn.LayerNormalization(center=center, scale=scale)
    layer.build(x.shape)
    layer.to("float64")
    gamma, beta = rng(10).standard_normal(5), rng(11).standard_normal(5)
    with encore.no_grad():
        for name, p in layer.named_parameters():
            p.copy_(encore.tensor(gamma if name == "gamma" else beta))
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-3)
    want = want * (gamma if scale else 1) + (beta if center else 0)
    np.testing.assert_allclose(layer(encore.tensor(x)).numpy(), want, rtol=1e-10, atol=1e-12)
    with encore.training(False):  # the same in both modes
        np.testing.assert_allclose(layer(encore.tensor(x)).numpy(), want, rtol=1e-10, atol=1e-12)


def test_layer_norm_function_and_errors():
    x = rng(12).standard_normal((2, 3))
    np.testing.assert_allclose(encore.layer_norm(x, axis=0, epsilon=1e-5).numpy(),
                               (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5), rtol=1e-10)
    mean, var = encore.moments(x, axes=(0,))
    np.testing.assert_allclose(mean.numpy(), x.mean(0), rtol=1e-12)
    np.testing.assert_allclose(var.numpy(), x.var(0), rtol=1e-12)
    with pytest.raises(encore.InvalidValueError, match=r"^\[moments\] an empty axis list reduces nothing"):
        encore.moments(x, axes=())  # as sum, mean and max refuse it
    assert nn.LayerNormalization()(encore.zeros(0, 4)).shape == (0, 4)
    with pytest.raises(encore.ShapeError, match=r"^\[layer_normalization\] input \(2, 5\) has 5 channels"):
        layer = nn.LayerNormalization()
        layer.build((2, 4))
        layer(encore.zeros(2, 5))
    with pytest.raises(encore.DTypeError, match=r"^\[layer_norm\] needs a floating tensor"):
        encore.layer_norm(encore.zeros(2, 3, dtype=encore.int32))


# ---- Embedding ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_embedding_looks_up_rows_and_scatter_adds_gradients(dtype):
    layer = nn.Embedding(7, 3)
    idx = rng(13).integers(0, 7, (2, 4, 5)).astype(dtype)
    idx[0, 0, :3] = 2  # a repeated index sums its gradients
    y = layer(encore.tensor(idx))
    table = layer.parameters()[0]
    assert y.shape == (2, 4, 5, 3) and table.shape == (7, 3)
    assert np.abs(table.numpy()).max() <= 0.05  # Keras' uniform(-0.05, 0.05)
    np.testing.assert_array_equal(y.numpy(), table.numpy()[idx])
    g = rng(14).standard_normal((2, 4, 5, 3)).astype(np.float32)
    (y * encore.tensor(g)).sum().backward()
    want = np.zeros((7, 3), np.float32)
    for n, k in enumerate(idx.ravel()):  # index order, as the kernel adds
        want[k] += g.reshape(-1, 3)[n]
    np.testing.assert_array_equal(table.grad.numpy(), want)


def test_embedding_hostile_inputs():
    layer = nn.Embedding(5, 2)
    with pytest.raises(ValueError, match=r"^\[embedding\] index 9 \(element 2 of indices \(2, 2\)\) is out of range "
                                         r"for input_dim 5"):
        layer(encore.tensor([[0, 1], [9, 2]]))
    with pytest.raises(ValueError, match=r"^\[embedding\] index -1 "):
        layer(encore.tensor(np.array([-1], np.int32)))
    with pytest.raises(encore.DTypeError, match=r"^\[embedding\] indices must be int32 or int64, got \(3,\) float32"
                                                r".*convert them"):
        layer(encore.tensor([0.0, 1.0, 2.0]))
    assert layer(encore.zeros(0, 4, dtype=encore.int64)).shape == (0, 4, 2)
    assert layer(encore.tensor(3)).shape == (2,)  # a scalar index
    with pytest.raises(encore.ShapeError, match=r"^\[embedding\] the table must be \(input_dim, output_dim\)"):
        encore.embedding(encore.zeros(5), encore.tensor([1]))
    with pytest.raises(ValueError, match=r"^\[embedding\] input_dim and output_dim must be >= 1"):
        nn.Embedding(0, 3)


def test_embedding_in_a_traced_step_reports_a_bad_index_at_replay():
    model = nn.Sequential([nn.Embedding(4, 3), nn.GlobalAveragePooling1D(), nn.Dense(1)])
    f = encore.trace(lambda i: model(i))
    good = encore.tensor([[0, 1, 3]])
    assert f(good).tolist() == model(good).tolist()
    with pytest.raises(ValueError, match=r"\[embedding\] index 4"):
        f(encore.tensor([[0, 4, 1]]))


# ---- activations ----------------------------------------------------------------------------

def test_gelu_exact_and_approximate_match_keras():
    x = np.linspace(-6, 6, 49)
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x])
    approx = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(encore.gelu(x).numpy(), exact, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(encore.gelu(x, approximate=True).numpy(), approx, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(encore.activation(x, "gelu").numpy(), exact, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(encore.erf(x).numpy(), [math.erf(v) for v in x], rtol=1e-15, atol=1e-300)
    t = encore.tensor(x, requires_grad=True)
    encore.gelu(t).sum().backward()
    pdf = np.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    cdf = np.array([0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x])
    np.testing.assert_allclose(t.grad.numpy(), cdf + x * pdf, rtol=1e-10, atol=1e-15)


def test_softmax_and_gelu_as_layer_activations():
    x = encore.tensor(rng(15).standard_normal((4, 5)).astype(np.float32))
    dense = nn.Dense(10, activation="softmax")
    p = dense(x).numpy()
    kernel, bias = (t.numpy() for t in dense.parameters())
    z = x.numpy() @ kernel + bias
    want = np.exp(z - z.max(-1, keepdims=True))
    np.testing.assert_allclose(p, want / want.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)
    assert nn.Conv1D(2, 3, activation="gelu")(encore.ones(1, 4, 2)).shape == (1, 2, 2)
    np.testing.assert_array_equal(nn.Activation("softmax")(x).numpy(), encore.softmax(x, -1).numpy())
    np.testing.assert_array_equal(nn.Activation("gelu")(x).numpy(), encore.gelu(x).numpy())
    with pytest.raises(ValueError, match=r"^\[lstm\] activation 'softmax' is not elementwise"):
        nn.LSTM(3, activation="softmax")
    with pytest.raises(ValueError, match=r"^\[activation\] unknown activation 'swishy'"):
        nn.Activation("swishy")


def test_lstm_with_gelu_activation_runs_the_fused_cell():
    # The fused cell's gelu (ops/functors.h) agrees with the composed activation.
    z = encore.tensor(rng(16).standard_normal((2, 12)))
    c = encore.tensor(rng(17).standard_normal((2, 3)))
    h, c1 = encore.lstm_cell(z, c, activation="gelu")
    zn, cn = z.numpy(), c.numpy()
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    gelu = lambda v: encore.gelu(v).numpy()  # noqa: E731
    i, f, g, o = sig(zn[:, :3]), sig(zn[:, 3:6]), gelu(zn[:, 6:9]), sig(zn[:, 9:])
    want_c = f * cn + i * g
    np.testing.assert_allclose(c1.numpy(), want_c, rtol=1e-12)
    np.testing.assert_allclose(h.numpy(), o * gelu(want_c), rtol=1e-12)


# ---- losses ---------------------------------------------------------------------------------

def keras_probabilities(p):
    p = p / p.sum(-1, keepdims=True)
    return np.clip(p, 1e-7, 1 - 1e-7)


def log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def test_categorical_crossentropy_matches_keras():
    # Keras' documented example: mean of -log 0.95 and -log 0.1.
    y = np.array([[0, 1, 0], [0, 0, 1]], np.float32)
    p = np.array([[0.05, 0.95, 0], [0.1, 0.8, 0.1]], np.float32)
    np.testing.assert_allclose(nn.categorical_crossentropy(y, p).item(), 1.1769392, rtol=1e-6)
    r = rng(18)
    targets = r.dirichlet(np.ones(4), (3, 5))  # probability targets of any leading shape
    probs = r.dirichlet(np.ones(4), (3, 5)) * 3  # not normalized: Keras rescales
    probs[0, 0, 1] = 0.0
    want = -(targets * np.log(keras_probabilities(probs))).sum(-1).mean()
    np.testing.assert_allclose(nn.categorical_crossentropy(targets, probs).item(), want, rtol=1e-12)
    logits = r.standard_normal((3, 5, 4)) * 30
    want = -(targets * log_softmax(logits)).sum(-1).mean()
    np.testing.assert_allclose(nn.categorical_crossentropy(targets, logits, from_logits=True).item(), want,
                               rtol=1e-12)


def test_sparse_categorical_crossentropy_matches_keras():
    labels = np.array([1, 2])
    p = np.array([[0.05, 0.95, 0], [0.1, 0.8, 0.1]], np.float32)
    np.testing.assert_allclose(nn.sparse_categorical_crossentropy(labels, p).item(), 1.1769392, rtol=1e-6)
    r = rng(19)
    labels = r.integers(0, 4, (3, 5))
    probs = r.dirichlet(np.ones(4), (3, 5)) * 2
    picked = np.take_along_axis(np.log(keras_probabilities(probs)), labels[..., None], -1)
    np.testing.assert_allclose(nn.sparse_categorical_crossentropy(labels.astype(np.int32), probs).item(),
                               -picked.mean(), rtol=1e-12)
    logits = r.standard_normal((3, 5, 4)) * 50  # saturated: the log_softmax path stays finite
    picked = np.take_along_axis(log_softmax(logits), labels[..., None], -1)
    z = encore.tensor(logits, requires_grad=True)
    loss = nn.sparse_categorical_crossentropy(labels, z, from_logits=True)
    np.testing.assert_allclose(loss.item(), -picked.mean(), rtol=1e-12)
    loss.backward()
    soft = np.exp(log_softmax(logits))
    np.testing.assert_allclose(z.grad.numpy(), (soft - np.eye(4)[labels]) / labels.size, rtol=1e-9, atol=1e-15)


def test_crossentropy_errors_are_named_for_the_loss():
    with pytest.raises(encore.ShapeError, match=r"^\[categorical_crossentropy\] targets \(4,\) and predictions "
                                                r"\(4, 3\) differ in shape"):
        nn.categorical_crossentropy(encore.zeros(4), encore.zeros(4, 3))
    with pytest.raises(encore.DTypeError, match=r"^\[categorical_crossentropy\] targets .* int64 .* differ in dtype"):
        nn.categorical_crossentropy(encore.zeros(4, 3, dtype=encore.int64), encore.zeros(4, 3))
    with pytest.raises(encore.ShapeError, match=r"^\[sparse_categorical_crossentropy\] labels \(4, 3\) must have "
                                                r"the shape of the predictions \(4, 3\) without"):
        nn.sparse_categorical_crossentropy(encore.zeros(4, 3, dtype=encore.int64), encore.ones(4, 3))
    with pytest.raises(encore.DTypeError, match=r"^\[sparse_categorical_crossentropy\] labels must be int32 or int64"):
        nn.sparse_categorical_crossentropy(encore.zeros(4), encore.ones(4, 3))
    with pytest.raises(ValueError, match=r"^\[sparse_categorical_crossentropy\] label 3 \(element 0"):
        nn.sparse_categorical_crossentropy(encore.tensor([3]), encore.ones(1, 3))
    # An empty batch: the mean over no rows is NaN, as for the other losses.
    assert math.isnan(nn.categorical_crossentropy(encore.zeros(0, 3), encore.ones(0, 3)).item())


# ---- hostile shapes for the pools -----------------------------------------------------------

def test_average_pool_hostile_inputs():
    assert nn.AveragePooling1D(2)(encore.zeros(0, 4, 3)).shape == (0, 2, 3)
    with pytest.raises(encore.ShapeError, match=r"^\[avg_pool1d\] input length 0 .* too short for kernel size 2"):
        encore.avg_pool1d(encore.zeros(2, 0, 3), 2)
    with pytest.raises(encore.ShapeError, match=r"^\[avg_pool1d\] expects \(batch, steps, channels\)"):
        encore.avg_pool1d(encore.zeros(4, 2), 2)
    with pytest.raises(encore.DTypeError, match=r"^\[avg_pool1d\] expects a floating tensor"):
        encore.avg_pool1d(encore.zeros(1, 4, 1, dtype=encore.int32), 2)
    with pytest.raises(ValueError, match=r"^\[average_pooling1d\] padding must be 'valid' or 'same'"):
        nn.AveragePooling1D(2, padding="causal")
    with pytest.raises(encore.ShapeError, match=r"^\[average_pooling1d\] expects input \(batch, steps, channels\)"):
        nn.AveragePooling1D(2).build((3, 4))


def test_normalization_layers_name_a_dtype_mismatch():
    bn = nn.BatchNormalization()
    bn.build((2, 3))
    with pytest.raises(encore.DTypeError, match=r"^\[batch_normalization\] input \(2, 3\) float64 .* and the "
                                                r"layer's float32 weights differ in dtype"):
        bn(encore.zeros(2, 3, dtype=encore.float64))
    with pytest.raises(encore.DTypeError, match=r"^\[layer_normalization\] input"):
        nn.LayerNormalization()(encore.zeros(2, 3, dtype=encore.float64))


@pytest.mark.parametrize("activation", ["gelu", "softmax", "relu", "tanh"])
def test_conv1d_layer_activation_is_applied_after_the_bias(activation):
    # gelu and softmax cannot ride in conv1d_fused's epilogue (their gradients are not functions
    # of the output): the layer applies them after the convolution, with the right gradient.
    encore.manual_seed(3)
    layer = nn.Conv1D(4, 3, padding="same", activation=activation)
    x = encore.randn(2, 7, 3, dtype=encore.float64)
    layer.build(x.shape)
    layer.to(encore.float64)
    kernel, bias = layer.parameters()
    weights = encore.randn(2, 7, 4, dtype=encore.float64)

    def reference():
        y = encore.conv1d(x, kernel, padding="same") + bias
        return encore.gelu(y) if activation == "gelu" else (
            encore.softmax(y) if activation == "softmax" else getattr(encore, activation)(y))

    grads = []
    for f in (lambda: layer(x), reference):
        kernel.grad = None
        y = f()
        (y * weights).sum().backward()
        grads.append((y.numpy(), kernel.grad.numpy()))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("activation", ["gelu", "softmax"])
def test_conv1d_fused_refuses_activations_it_cannot_differentiate(activation):
    x, w, b = encore.zeros(1, 4, 2), encore.zeros(3, 2, 5), encore.zeros(5)
    with pytest.raises(ValueError, match=r"\[conv1d_fused\] activation " + activation):
        encore.conv1d_fused(x, w, b, activation=activation)
