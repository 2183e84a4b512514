"""What Keras and PyTorch users reach for on day one (issue 28): summary, state_dict /
load_state_dict, get_weights / set_weights, zero_grad, the AUC / precision / recall / MAE metrics,
class_weight and sample_weight, validation data with weights, generators and re-iterables in fit,
ArrayDataset, and other libraries' tensors taken through DLPack. References are NumPy code written
here (and scikit-learn where it is installed), never encore's own output."""

import warnings

import numpy as np
import pytest

import encore
from encore import data, metrics, nn, optim


def make_data(n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] + 0.5 * rng.standard_normal(n) > 0).astype(np.float32)[:, None]
    return x, y


def make_model(mode="traced", metrics_=(), seed=1):
    encore.manual_seed(seed)
    model = nn.Sequential([nn.Dense(8, activation="relu"), nn.Dense(1, activation="sigmoid")])
    model.build((1, 4))
    model.compile(optim.Adam(model.parameters(), lr=0.02), "binary_crossentropy", metrics=list(metrics_), mode=mode)
    return model


def params(model):
    return [p.numpy().copy() for p in model.parameters()]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1D(4, 3, activation="relu")
        self.norm = nn.BatchNormalization()
        self.blocks = [nn.Dense(5), nn.Dense(3)]
        self.pool = nn.GlobalAveragePooling1D()
        self.head = nn.Dense(1)

    def forward(self, x):
        h = self.norm(self.conv(x))
        for block in self.blocks:
            h = block(h)
        return self.head(self.pool(h))


# ---- summary --------------------------------------------------------------------------------


def test_summary_of_a_sequential_prints_and_needs_no_input_shape(capsys):
    model = nn.Sequential([nn.Conv1D(4, 3), nn.GlobalAveragePooling1D(), nn.Dense(2)])
    with pytest.raises(ValueError, match=r"\[sequential\] summary needs a built model"):
        model.summary()
    model(encore.randn(2, 10, 3))  # built by its first call
    assert model.summary() is None  # printed, as Keras: nothing echoes twice in a REPL
    out = capsys.readouterr().out.splitlines()
    assert out[0] == 'Model: "sequential"'
    assert out[1].split() == ["Layer", "(type)", "Output", "Shape", "Param", "#"]
    rows = {line.split(" (")[0]: line.split() for line in out if line.startswith(("conv1d", "global", "dense"))}
    assert rows["conv1d"][-4:] == ["(None,", "8,", "4)", "40"]  # 3 * 3 * 4 + 4
    assert rows["global_average_pooling1d"][-3:] == ["(None,", "4)", "0"]
    assert rows["dense"][-3:] == ["(None,", "2)", "10"]
    assert "Total params: 50" in out and "Trainable params: 50" in out and "Non-trainable params: 0" in out
    lines = []
    model.summary(print_fn=lines.append)
    assert lines == out


def test_summary_of_a_subclassed_model_lists_its_layers():
    model = Net()
    with pytest.raises(ValueError, match=r"\[net\] summary needs a built model"):
        model.summary()
    model(encore.randn(2, 10, 3))
    lines = []
    model.summary(print_fn=lines.append)
    text = "\n".join(lines)
    for name, shape in [("conv", "(None, 8, 4)"), ("norm", "(None, 8, 4)"), ("blocks.0", "(None, 8, 5)"),
                        ("blocks.1", "(None, 8, 3)"), ("pool", "(None, 3)"), ("head", "(None, 1)")]:
        assert any(line.startswith(name + " (") and shape in line for line in lines), (name, text)
    total = sum(p.numpy().size for _, p in model.named_weights())
    buffers = sum(b.numpy().size for _, b in model.named_buffers())
    assert buffers == 8
    assert f"Total params: {total:,}" in lines and f"Non-trainable params: {buffers}" in lines


# ---- state_dict, get_weights, zero_grad ------------------------------------------------------


def test_state_dict_round_trips_through_safetensors(tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    encore.manual_seed(0)
    model = Net()
    x = encore.randn(2, 10, 3)
    model(x)
    sd = model.state_dict()
    assert list(sd) == [n for n, _ in model.named_weights()]
    assert all(not t.requires_grad for t in sd.values())
    path = tmp_path / "model.safetensors"
    safetensors_numpy.save_file({k: v.numpy() for k, v in sd.items()}, str(path))
    encore.manual_seed(5)
    other = Net()
    other(x)
    kernel = other.parameters()[0]
    before = kernel.numpy().copy()
    keys = other.load_state_dict(safetensors_numpy.load_file(str(path)))
    assert keys.missing_keys == [] and keys.unexpected_keys == []
    assert not np.array_equal(before, kernel.numpy())  # written in place
    model.eval()
    other.eval()
    assert np.array_equal(model(x).numpy(), other(x).numpy())
    # encore.nn.save writes the same names
    nn.save(model, tmp_path / "saved.safetensors")
    assert set(safetensors_numpy.load_file(str(tmp_path / "saved.safetensors"))) == set(sd)


def test_load_state_dict_strict_and_errors():
    model = nn.Sequential([nn.Dense(2)])
    model.build((1, 3))
    sd = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match=r"missing 'dense.bias'; unexpected 'extra'"):
        model.load_state_dict({"dense.kernel": sd["dense.kernel"], "extra": np.zeros(1, np.float32)})
    keys = model.load_state_dict({"dense.kernel": np.ones((3, 2), np.float32), "extra": np.zeros(1)}, strict=False)
    assert keys == nn.IncompatibleKeys(["dense.bias"], ["extra"])
    assert np.array_equal(model.parameters()[0].numpy(), np.ones((3, 2), np.float32))
    with pytest.raises(encore.ShapeError, match=r"'dense.kernel' has shape \(3, 2\)"):
        model.load_state_dict({"dense.kernel": np.zeros((2, 3)), "dense.bias": sd["dense.bias"]})
    assert np.array_equal(model.parameters()[0].numpy(), np.ones((3, 2), np.float32))  # all or nothing
    with pytest.raises(TypeError, match="expected a mapping"):
        model.load_state_dict([("dense.kernel", sd["dense.kernel"])])


def test_get_and_set_weights_in_keras_order():
    model = nn.Sequential([nn.Dense(4), nn.BatchNormalization(), nn.Dense(1)])
    model.build((2, 3))
    weights = model.get_weights()
    assert all(isinstance(w, np.ndarray) for w in weights)
    # per layer, trainable then non-trainable: dense (kernel, bias), bn (gamma, beta, mean, variance), dense
    assert [w.shape for w in weights] == [(3, 4), (4,), (4,), (4,), (4,), (4,), (4, 1), (1,)]
    new = [np.full(w.shape, i, np.float64) for i, w in enumerate(weights)]
    model.set_weights(new)
    assert [float(w.flat[0]) for w in model.get_weights()] == list(range(8))
    assert model.get_weights()[0].dtype == np.float32
    weights[0][:] = 99  # copies: the model does not change
    assert model.get_weights()[0][0, 0] == 0
    with pytest.raises(ValueError, match=r"\[set_weights\] sequential has 8 weights, got 1 values"):
        model.set_weights(new[:1])
    with pytest.raises(encore.ShapeError):
        model.set_weights([np.zeros((5,))] + new[1:])


def test_zero_grad():
    model = nn.Sequential([nn.Dense(2)])
    model(encore.randn(3, 4)).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    model.zero_grad(set_to_none=False)
    assert all(np.array_equal(p.grad.numpy(), np.zeros(p.shape, np.float32)) for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


# ---- metrics --------------------------------------------------------------------------------


def auc_reference(y, p, n=200):
    """Keras' thresholded ROC AUC, written from its definition in NumPy (float64 counts)."""
    t = np.array([0 - 1e-7] + [(i + 1) / (n - 1) for i in range(n - 2)] + [1 + 1e-7]).astype(p.dtype)
    pos = p.reshape(-1, 1) > t.reshape(1, -1)
    yy = y.reshape(-1, 1).astype(bool)
    tp, fp = (pos & yy).sum(0), (pos & ~yy).sum(0)
    tpr, fpr = tp / yy.sum(), fp / (~yy).sum()
    return float(np.sum((fpr[:-1] - fpr[1:]) * (tpr[:-1] + tpr[1:]) / 2))


def exact_auc(y, p):
    """The exact area: the probability that a positive scores above a negative (ties count half)."""
    pos, neg = p[y == 1], p[y == 0]
    return float(((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()) /
                 (pos.size * neg.size))


@pytest.mark.parametrize("mode", ["eager", "traced"])
def test_auc_precision_recall_mae_over_the_whole_pass(mode):
    x, y = make_data(203, seed=3)
    model = make_model(mode, ["auc", metrics.Precision(), metrics.Recall(0.3, name="recall_at_0.3"), "mae",
                              metrics.AUC(num_thresholds=50, name="auc_50")])
    model.fit(x, y, epochs=1, verbose=0)
    logs = model.evaluate(x, y, batch_size=16, return_dict=True)  # counts summed over 13 batches
    p = model.predict(x).reshape(-1)
    t = y.reshape(-1)
    assert logs["auc"] == pytest.approx(auc_reference(t, p), abs=1e-12)
    assert logs["auc_50"] == pytest.approx(auc_reference(t, p, 50), abs=1e-12)
    assert abs(logs["auc"] - exact_auc(t, p)) < 0.01
    predicted = p > 0.5
    assert logs["precision"] == pytest.approx((predicted & (t == 1)).sum() / predicted.sum(), abs=1e-12)
    assert logs["recall_at_0.3"] == pytest.approx(((p > 0.3) & (t == 1)).sum() / (t == 1).sum(), abs=1e-12)
    assert logs["mae"] == pytest.approx(np.abs(p.astype(np.float64) - t).mean(), rel=1e-6)
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    assert logs["precision"] == pytest.approx(sklearn_metrics.precision_score(t, predicted), abs=1e-12)
    assert abs(logs["auc"] - sklearn_metrics.roc_auc_score(t, p)) < 0.01


def test_count_metrics_edge_cases():
    model = make_model(metrics_=["precision", "recall", "auc"])
    x = np.zeros((4, 4), np.float32)
    logs = model.evaluate(x, np.zeros((4, 1), np.float32), return_dict=True)  # no positives anywhere
    assert logs["recall"] == 0.0 and logs["auc"] == 0.0
    with pytest.raises(ValueError, match=r"\[auc\] num_thresholds must be > 1"):
        metrics.AUC(num_thresholds=1)
    sparse = nn.Sequential([nn.Dense(3, activation="softmax")])
    sparse.compile("adam", "sparse_categorical_crossentropy", metrics=["auc"])
    with pytest.raises(encore.ShapeError, match=r"\[auc\] needs binary targets with one value per prediction"):
        sparse.evaluate(x, np.zeros(4, np.int64))


# ---- class_weight, sample_weight -------------------------------------------------------------


def bce_rows(y, p):
    p = np.clip(p.astype(np.float64), 1e-7, 1 - 1e-7)
    return -(y * np.log(p) + (1 - y) * np.log(1 - p)).reshape(len(y), -1).mean(1)


@pytest.mark.parametrize("mode", ["eager", "traced"])
def test_sample_weight_in_evaluate_matches_a_numpy_reference(mode):
    x, y = make_data(50)
    model = make_model(mode)
    w = np.random.default_rng(4).uniform(0, 3, 50).astype(np.float32)
    p = model.predict(x)
    rows = bce_rows(y, p)
    # Keras: each batch's loss is mean(loss_i * w_i) over its rows; the pass averages batches by size.
    expected = sum((rows[i:i + 16] * w[i:i + 16]).mean() * len(rows[i:i + 16]) for i in range(0, 50, 16)) / 50
    got = model.evaluate(x, y, batch_size=16, sample_weight=w)
    assert got == pytest.approx(expected, rel=1e-5)
    assert model.evaluate(x, y, batch_size=16) == pytest.approx(rows.mean(), rel=1e-5)


def test_class_weight_equals_its_sample_weights_and_traced_equals_eager():
    x, y = make_data(96)
    cw = {0: 0.25, 1: 3.0}
    runs = {}
    for mode in ("eager", "traced"):
        a = make_model(mode)
        ha = a.fit(x, y, batch_size=32, epochs=3, class_weight=cw, seed=2, verbose=0)
        b = make_model(mode)
        hb = b.fit(x, y, batch_size=32, epochs=3, sample_weight=np.where(y[:, 0] == 1, 3.0, 0.25), seed=2, verbose=0)
        assert ha.history == hb.history
        for u, v in zip(params(a), params(b)):
            assert u.tobytes() == v.tobytes()
        c = make_model(mode)
        c.fit(x, y, batch_size=32, epochs=3, seed=2, verbose=0)
        assert any(u.tobytes() != v.tobytes() for u, v in zip(params(a), params(c)))  # the weights did something
        runs[mode] = params(a)
    for u, v in zip(runs["eager"], runs["traced"]):
        assert u.tobytes() == v.tobytes()


def test_weights_with_validation_and_batches_and_errors():
    x, y = make_data(64)
    w = np.linspace(0.5, 2, 64).astype(np.float32)
    model = make_model()
    h = model.fit(x, y, batch_size=16, validation_split=0.25, sample_weight=w, verbose=0)
    val = model.evaluate(x[48:], y[48:], batch_size=16, sample_weight=w[48:])
    assert h.history["val_loss"][0] == pytest.approx(val, rel=1e-6)
    h = model.fit(x, y, batch_size=16, validation_data=(x[:16], y[:16], w[:16]), verbose=0)
    assert h.history["val_loss"][0] == pytest.approx(model.evaluate(x[:16], y[:16], sample_weight=w[:16]), rel=1e-6)
    batches = [(x[i:i + 16], y[i:i + 16], w[i:i + 16]) for i in range(0, 64, 16)]
    a, b = make_model(), make_model()
    a.fit(batches, verbose=0)
    b.fit(x, y, batch_size=16, shuffle=False, sample_weight=w, verbose=0)
    assert all(u.tobytes() == v.tobytes() for u, v in zip(params(a), params(b)))
    with pytest.raises(encore.ShapeError, match="sample_weight must hold one weight per row"):
        model.fit(x, y, sample_weight=w[:10], verbose=0)
    with pytest.raises(ValueError, match=r"\[fit\] sample_weight must hold one weight per row \(shape \(rows,\)\)"):
        model.fit(x, y, sample_weight=w[:, None], verbose=0)
    custom = nn.Sequential([nn.Dense(1, activation="sigmoid")])
    custom.compile("sgd", lambda t, p: encore.mean((t - p) * (t - p)))
    with pytest.raises(ValueError, match="need a loss that weighs rows"):
        custom.fit(x, y, sample_weight=w, verbose=0)
    per_row = nn.Sequential([nn.Dense(1, activation="sigmoid")])
    per_row.compile("sgd", lambda t, p: encore.mean((t - p) * (t - p), 1))  # Keras' form: one loss per row
    per_row.build((1, 4))
    p = per_row.predict(x)
    assert per_row.evaluate(x, y, batch_size=64, sample_weight=w) == pytest.approx(
        (((y - p) ** 2).mean(1) * w).mean(), rel=1e-5)


# ---- generators, re-iterables, ArrayDataset --------------------------------------------------


class Loader:
    """A re-iterable: every __iter__ starts afresh."""

    def __init__(self, x, y, batch):
        self.x, self.y, self.batch = x, y, batch
        self.passes = 0

    def __iter__(self):
        self.passes += 1
        for i in range(0, len(self.x), self.batch):
            yield self.x[i:i + self.batch], self.y[i:i + self.batch]


def test_reiterable_trains_every_epoch():
    x, y = make_data(64)
    loader = Loader(x, y, 16)
    model = make_model()
    h = model.fit(loader, epochs=3, verbose=0)
    assert loader.passes == 3 and len(h.history["loss"]) == 3 and model.iterations == 12


def test_generator_needs_steps_per_epoch_and_runs_out_with_a_warning():
    x, y = make_data(64)

    def gen():
        for i in range(0, 64, 16):
            yield x[i:i + 16], y[i:i + 16]

    model = make_model()
    with pytest.raises(ValueError, match=r"x is a one-shot iterator \(generator\).*steps_per_epoch"):
        model.fit(gen(), epochs=2, verbose=0)
    assert model.iterations == 0  # refused before training
    h = model.fit(gen(), epochs=2, steps_per_epoch=2, verbose=0)  # 4 batches: 2 epochs of 2
    assert model.iterations == 4 and len(h.history["loss"]) == 2
    model = make_model()
    with pytest.warns(UserWarning, match=r"ran out after 1 of 3 steps of epoch 2: training stops"):
        h = model.fit(gen(), epochs=5, steps_per_epoch=3, verbose=0)
    assert model.iterations == 4 and len(h.history["loss"]) == 2
    # A re-iterable with steps_per_epoch goes on across epochs and starts again when a pass ends.
    loader = Loader(x, y, 16)
    model = make_model()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.fit(loader, epochs=3, steps_per_epoch=3, verbose=0)
    assert model.iterations == 9 and loader.passes == 3
    # Same batches in the same order as arrays without shuffling.
    a, b = make_model(), make_model()
    a.fit(Loader(x, y, 16), epochs=2, steps_per_epoch=2, verbose=0)
    b.fit(x, y, batch_size=16, shuffle=False, epochs=1, verbose=0)
    assert all(u.tobytes() == v.tobytes() for u, v in zip(params(a), params(b)))
    with pytest.raises(ValueError, match="validation_data is a one-shot iterator"):
        make_model().fit(x, y, epochs=2, validation_data=gen(), verbose=0)


def test_array_dataset_is_iterable_and_fits():
    x, y = make_data(10)
    ds = data.ArrayDataset(encore.Tensor(x), encore.Tensor(y), batch_size=4, shuffle=True, seed=3)
    assert len(ds) == 3
    first, second = list(ds), list(ds)  # each iteration is the next pass: a new order
    assert [len(b[0]) for b in first] == [4, 4, 2]
    rows = np.concatenate([bx.numpy() for bx, _ in first])
    assert sorted(map(tuple, rows)) == sorted(map(tuple, x))
    assert not np.array_equal(rows, np.concatenate([bx.numpy() for bx, _ in second]))
    assert np.array_equal(rows, x[ds.order(0)])
    weighted = data.ArrayDataset(encore.Tensor(x), encore.Tensor(y), batch_size=5,
                                 sample_weight=encore.Tensor(np.arange(10, dtype=np.float32)))
    assert [w.numpy().tolist() for _, _, w in weighted] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    model = make_model()
    model.fit(ds, epochs=2, verbose=0)
    assert model.iterations == 6
    assert model.evaluate(weighted) == pytest.approx(
        model.evaluate(x, y, batch_size=5, sample_weight=np.arange(10, dtype=np.float32)))
    with pytest.raises(encore.ShapeError, match="sample_weight must hold one weight per row"):
        data.ArrayDataset(encore.Tensor(x), sample_weight=encore.Tensor(np.ones(3, np.float32)))


# ---- other libraries' tensors ---------------------------------------------------------------


class Foreign:
    """A tensor of another library: only the DLPack protocol (NumPy's, underneath)."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_dlpack_tensors_reach_models_ops_and_fit():
    x, y = make_data(32)
    model = make_model()
    expected = model(encore.Tensor(x)).numpy()
    assert np.array_equal(model(Foreign(x)).numpy(), expected)
    assert np.array_equal(encore.exp(Foreign(x)).numpy(), encore.exp(x).numpy())
    t = encore.tensor(Foreign(x))  # a copy
    x[0, 0] += 1
    assert t.numpy()[0, 0] != x[0, 0]
    assert encore.Tensor(Foreign(x)).numpy()[0, 0] == x[0, 0]  # shared
    model.fit(Foreign(x), Foreign(y), verbose=0)
    with pytest.raises(TypeError, match=r"\[sequential\] expected a Tensor, a NumPy array or a DLPack tensor"):
        model([[1.0, 2.0, 3.0, 4.0]])


def test_torch_tensors_through_dlpack():
    torch = pytest.importorskip("torch")
    x, y = make_data(32)
    model = make_model()
    tx = torch.from_numpy(x)
    assert np.array_equal(model(tx).numpy(), model(encore.Tensor(x)).numpy())
    assert np.array_equal(encore.exp(tx).numpy(), encore.exp(x).numpy())
    model.fit(tx, torch.from_numpy(y), verbose=0)
    model.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in model.state_dict().items()})
