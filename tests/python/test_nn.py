"""encore.nn layers, Sequential, losses and encore.optim (checkpoints: test_checkpoint.py)."""

import numpy as np
import pytest

import encore
from encore import nn, optim


def test_layers_shapes_and_parameters():
    x = encore.randn(4, 20, 6)
    assert nn.Dense(5)(x).shape == (4, 20, 5)
    assert nn.Dense(5, activation="relu", use_bias=False).build((4, 6)) == (4, 5)
    conv = nn.Conv1D(8, 3, strides=2, padding="same", dilation_rate=1, activation="tanh")
    assert conv(x).shape == (4, 10, 8)
    assert [n for n, _ in conv.named_parameters()] == ["kernel", "bias"]
    assert conv.named_parameters()[0][1].shape == (3, 6, 8)
    assert conv.num_parameters() == 3 * 6 * 8 + 8
    lstm = nn.LSTM(7, return_sequences=True)
    assert lstm(x).shape == (4, 20, 7) and lstm.units == 7 and not lstm.uses_cudnn(x)
    assert nn.LSTM(7, activation="relu", implementation="composed", reverse=True)(x).shape == (4, 7)
    bi = nn.Bidirectional(nn.LSTM(5), merge_mode="concat")
    assert bi(x).shape == (4, 10)
    assert nn.Bidirectional(nn.LSTM(5), merge_mode="sum")(x).shape == (4, 5)
    assert nn.GlobalAveragePooling1D()(x).shape == (4, 6)
    np.testing.assert_allclose(nn.GlobalMaxPooling1D()(x).numpy(), x.numpy().max(axis=1))
    assert nn.Flatten()(x).shape == (4, 120)
    assert nn.Dropout(0.3)(x).shape == x.shape
    with pytest.raises(ValueError):
        nn.LSTM(3, implementation="fast")


@pytest.mark.parametrize("cell", [nn.LSTM, nn.GRU])
def test_recurrent_fused_on_the_cpu_matches_the_composed_one(cell):
    x = encore.randn(3, 9, 4)
    fused = cell(5, return_sequences=True)
    composed = cell(5, return_sequences=True, implementation="composed")
    fused.build(x.shape)
    composed.build(x.shape)
    with encore.no_grad():
        for a, b in zip(composed.parameters(), fused.parameters()):
            a.copy_(b)
    assert fused.uses_onednn(x) and not composed.uses_onednn(x)
    assert not cell(5, activation="relu").uses_onednn(x)
    grads = []
    for layer in (fused, composed):
        xg = x.detach().requires_grad_()
        y = layer(xg)
        (y * y).sum().backward()
        grads.append([y.numpy(), xg.grad.numpy()] + [p.grad.numpy() for p in layer.parameters()])
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_sequential():
    model = nn.Sequential([nn.Conv1D(4, 3), nn.GlobalAveragePooling1D()])
    dense = model.add(nn.Dense(1, activation="sigmoid"))
    assert isinstance(dense, nn.Dense) and len(model) == 3 and model[-1] is not None
    assert model.build((2, 10, 3)) == (2, 1) and model.built and model.output_shape == (2, 1)
    names = [n for n, _ in model.named_parameters()]
    assert names == ["conv1d.kernel", "conv1d.bias", "dense.kernel", "dense.bias"]
    assert [p.name for p in model.parameters()] == names
    assert all(p.requires_grad for p in model.parameters())
    lines = []
    model.summary(print_fn=lines.append)
    assert lines[3].startswith("conv1d (conv1d)") and "Total params: 45" in lines
    with pytest.raises(TypeError, match=r"\[summary\] print_fn must be callable, got tuple"):
        model.summary((2, 10, 3))  # the former form, which took an input shape
    assert [layer.type_name for layer in model.layers] == ["conv1d", "global_average_pooling1d", "dense"]
    assert model(encore.randn(2, 10, 3)).shape == (2, 1)
    assert "sequential" in repr(model)
    with pytest.raises(TypeError):
        nn.Sequential([3])


def test_module_to_dtype_keeps_tensors():
    model = nn.Sequential([nn.Dense(3)])
    model.build((2, 4))
    params = model.parameters()
    assert model.to(encore.float64) is model
    assert all(p.dtype == encore.float64 for p in params)  # same tensors, new storage
    assert model(encore.randn(2, 4, dtype=encore.float64)).dtype == encore.float64
    model.to("float32").to("cpu")
    assert model.parameters()[0].dtype == encore.float32


def test_losses():
    y = encore.tensor([[1.0], [0.0]])
    p = encore.tensor([[0.9], [0.2]])
    expected = -(np.log(0.9) + np.log(0.8)) / 2
    np.testing.assert_allclose(nn.binary_crossentropy(y, p).item(), expected, rtol=1e-5)
    logits = encore.tensor([[2.0], [-1.0]])
    ref = np.mean(np.log1p(np.exp(-np.array([2.0, 1.0]))))
    np.testing.assert_allclose(nn.binary_crossentropy(y, logits, from_logits=True).item(), ref, rtol=1e-5)
    np.testing.assert_allclose(nn.mean_squared_error(y, p).item(), (0.01 + 0.04) / 2, rtol=1e-5)
    labels = encore.tensor([0, 2])
    scores = encore.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 3.0]])
    ls = scores.numpy() - np.log(np.exp(scores.numpy()).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(nn.sparse_categorical_crossentropy(labels, scores, from_logits=True).item(),
                               -(ls[0, 0] + ls[1, 2]) / 2, rtol=1e-5)
    assert nn.binary_accuracy(y, p) == 1.0 and nn.binary_accuracy(y, p, threshold=0.95) == 0.5


def stable_bce(z, y):
    """softplus(z) - z * y in float64, without cancellation."""
    z, y = np.asarray(z, np.float64), np.asarray(y, np.float64)
    return np.maximum(z, 0) + np.log1p(np.exp(-np.abs(z))) - z * y


@pytest.mark.parametrize("dtype", [encore.float32, encore.float64])
def test_binary_crossentropy_of_a_sigmoid_uses_the_logits(dtype):
    zs, ys = [20.0, -20.0, 40.0, 0.3, -1.5], [0.0, 1.0, 0.0, 1.0, 0.0]
    z = encore.tensor(zs, dtype=dtype, requires_grad=True)
    y = encore.tensor(ys, dtype=dtype)
    loss = nn.binary_crossentropy(y, encore.sigmoid(z))
    np.testing.assert_allclose(loss.item(), stable_bce(zs, ys).mean(), rtol=1e-6)
    loss.backward()
    np.testing.assert_allclose(z.grad.numpy(), (1 / (1 + np.exp(-np.array(zs))) - ys) / len(zs),
                               atol=1e-7)
    # BCE(0, sigmoid(20)): Keras 3 gives loss 20 and gradient 1; clipping gave 16.1 and 0.
    z = encore.tensor([20.0], dtype=dtype, requires_grad=True)
    loss = nn.binary_crossentropy(encore.zeros(1, dtype=dtype), z.sigmoid())
    np.testing.assert_allclose(loss.item(), 20.0, rtol=1e-6)
    loss.backward()
    np.testing.assert_allclose(z.grad.tolist(), [1.0])


def test_binary_crossentropy_of_a_sigmoid_layer_traced_and_eager():
    x = encore.tensor((np.random.default_rng(0).normal(size=(8, 3)) * 60).astype(np.float32))

    def model_and_sgd():
        encore.manual_seed(0)
        model = nn.Sequential([nn.Dense(1, activation="sigmoid")])
        model.build((8, 3))
        return model, optim.SGD(model.parameters(), lr=1.0)

    # Targets opposite to the initial predictions, which saturate: the case clipping gets wrong.
    kernel, bias = (p.numpy().astype(np.float64) for p in model_and_sgd()[0].parameters())
    logits = x.numpy().astype(np.float64) @ kernel + bias
    assert np.abs(logits).max() > 17  # 1 - sigmoid rounds to 0 in float32
    y = encore.tensor((logits < 0).astype(np.float32))

    def run(traced):
        model, sgd = model_and_sgd()

        def step(x, y):
            sgd.zero_grad()
            loss = nn.binary_crossentropy(y, model(x))
            loss.backward()
            sgd.step()
            return loss

        loss = (encore.trace(step) if traced else step)(x, y)
        return loss.item(), [p.numpy().copy() for p in model.parameters()]

    eager_loss, eager_params = run(False)
    traced_loss, traced_params = run(True)
    np.testing.assert_allclose(eager_loss, stable_bce(logits, y.numpy()).mean(), rtol=1e-5)
    assert eager_loss == traced_loss
    for e, t in zip(eager_params, traced_params):
        np.testing.assert_array_equal(e, t)


def test_binary_crossentropy_clips_probabilities_changed_since_the_sigmoid():
    clipped = -np.log(1 - np.float32(1 - 1e-7))  # 15.9: the clipped probability, in float32
    y = encore.zeros(1)
    p = encore.sigmoid(encore.tensor([20.0]))
    np.testing.assert_allclose(nn.binary_crossentropy(y, p).item(), 20.0, rtol=1e-6)
    p += 0.0  # written in place: the logits no longer describe it
    np.testing.assert_allclose(nn.binary_crossentropy(y, p).item(), clipped, rtol=1e-4)
    z = encore.tensor([20.0])
    q = encore.sigmoid(z)
    z.fill_(0.0)
    np.testing.assert_allclose(nn.binary_crossentropy(y, q).item(), clipped, rtol=1e-4)
    r = encore.sigmoid(encore.tensor([[20.0]]))
    np.testing.assert_allclose(nn.binary_crossentropy(y, r.reshape(1)).item(), clipped, rtol=1e-4)


def test_optimizers():
    w = encore.tensor([1.0, 2.0], requires_grad=True)
    sgd = optim.SGD([w], lr=0.1)
    (w * w).sum().backward()
    sgd.step()
    np.testing.assert_allclose(w.numpy(), [0.8, 1.6], rtol=1e-6)
    sgd.zero_grad()
    assert w.grad is None
    (w * w).sum().backward()
    sgd.zero_grad(set_to_none=False)
    assert w.grad.tolist() == [0, 0]
    assert sgd.lr == pytest.approx(0.1)
    sgd.lr = 0.5
    assert sgd.lr == 0.5 and len(sgd.params) == 1

    v = encore.tensor([1.0], requires_grad=True)
    mom = optim.SGD([v], lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)
    (v * 2).sum().backward()
    mom.step()
    assert v.item() < 1 and sorted(mom.state()) == ["#0.momentum", "lr"]

    p = encore.tensor([1.0, -1.0], requires_grad=True)
    adam = optim.Adam(iter([p]), lr=0.1)
    for _ in range(3):
        adam.zero_grad()
        (p * p).sum().backward()
        adam.step()
    assert adam.iterations == 3 and abs(p.numpy()).max() < 1
    state = adam.state()
    assert isinstance(state, dict) and any(k.endswith(".m") or k.endswith("m") for k in state)
    with pytest.raises(TypeError):
        optim.Adam([1.0])
