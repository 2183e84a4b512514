"""Module.compile / fit / evaluate / predict (issue 11): NumPy arrays and iterables as data,
traced and eager runs with the same bits, the last partial batch traced once, callbacks,
learning-rate schedules, the progress bar and the cost summary."""

import math

import numpy as np
import pytest

import encore
from encore import callbacks, nn, optim


def make_data(n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.float32)[:, None]
    return x, y


def make_model(seed=1, mode="traced", optimizer=None, metrics=("accuracy",)):
    encore.manual_seed(seed)
    model = nn.Sequential([nn.Dense(8, activation="relu"), nn.Dropout(0.25), nn.Dense(1, activation="sigmoid")])
    model.build((1, 4))
    opt = optimizer(model.parameters()) if optimizer else optim.Adam(model.parameters(), lr=0.02)
    model.compile(opt, "binary_crossentropy", metrics=list(metrics), mode=mode)
    return model


def params(model):
    return [p.numpy().copy() for p in model.parameters()]


def assert_same(a, b):
    assert len(a) == len(b)
    for u, v in zip(a, b):
        assert u.dtype == v.dtype and u.shape == v.shape and u.tobytes() == v.tobytes()


def test_fit_learns_and_traced_equals_eager_bitwise():
    x, y = make_data(200)
    xv, yv = make_data(50, seed=1)
    runs = {}
    for mode in ("eager", "traced"):
        model = make_model(mode=mode)
        h = model.fit(x, y, batch_size=32, epochs=4, validation_data=(xv, yv), seed=7, verbose=0)
        runs[mode] = (h.history, params(model), model.predict(xv), model.evaluate(xv, yv, return_dict=True))
    assert runs["eager"][0] == runs["traced"][0]
    assert_same(runs["eager"][1], runs["traced"][1])
    assert runs["eager"][2].tobytes() == runs["traced"][2].tobytes()
    assert runs["eager"][3] == runs["traced"][3]
    history = runs["traced"][0]
    assert set(history) == {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert history["loss"][-1] < history["loss"][0] and history["val_accuracy"][-1] > 0.85


def test_partial_batch_traces_once_and_the_cost_summary(capsys):
    x, y = make_data(200)
    model = make_model()
    h = model.fit(x, y, batch_size=32, epochs=5, validation_split=0.2, verbose=2)
    out = capsys.readouterr().out
    # 160 training rows: five full batches; 40 validation rows: 32 + 8.
    steps = model.traced_steps
    assert steps["train"]["traces"] == 1 and steps["train"]["calls"] == 25
    assert steps["test"]["traces"] == 2 and steps["test"]["calls"] == 10
    assert h.epoch == [0, 1, 2, 3, 4] and len(h.history["val_loss"]) == 5
    lines = out.splitlines()
    assert [l.split(" - ")[0] for l in lines[:5]] == [f"Epoch {i}/5" for i in range(1, 6)]
    assert "/step - loss: " in lines[0] and " - val_accuracy: " in lines[0]
    assert lines[5] == h.cost
    assert h.cost.startswith("cost (traced): 3 traces (train_step call 1: first call; test_step call 1: first call; "
                             "test_step call 2: new signature: arg 0 (x): shape (32, 4) -> (8, 4)")
    assert " replays; tracing " in h.cost and " per replay)" in h.cost
    # Another fit traces nothing.
    h2 = model.fit(x, y, batch_size=32, epochs=1, validation_split=0.2, verbose=0)
    assert h2.cost.startswith("cost (traced): 0 traces, 7 replays")


def test_progress_bar(capsys):
    x, y = make_data(64)
    model = make_model()
    model.fit(x, y, batch_size=16, epochs=2, verbose=1)
    out = capsys.readouterr().out
    # Not a terminal: one final bar line per epoch.
    assert out.count("Epoch ") == 2 and "\r" not in out
    assert "4/4 [==============================] " in out and "/step - loss: " in out and " - accuracy: " in out
    assert out.rstrip().splitlines()[-1].startswith("cost (traced): ")
    model.fit(x, y, epochs=1, verbose=0)
    assert capsys.readouterr().out == ""


def test_iterables_of_batches():
    x, y = make_data(96)
    batches = [(x[i:i + 32], y[i:i + 32]) for i in range(0, 96, 32)]
    a = make_model()  # each model and its fit from the same seed (dropout masks)
    ha = a.fit(batches, epochs=2, validation_data=batches[:1], verbose=0)
    b = make_model()
    hb = b.fit(x, y, batch_size=32, epochs=2, shuffle=False, validation_data=(x[:32], y[:32]), verbose=0)
    assert ha.history == hb.history
    assert_same(params(a), params(b))
    pred = a.predict([bx for bx, _ in batches])
    assert pred.shape == (96, 1) and pred.tobytes() == a.predict(x).tobytes()
    assert a.evaluate(batches, return_dict=True) == a.evaluate(x, y, return_dict=True)

    def once():
        yield from batches
    with pytest.raises(ValueError, match="x is a one-shot iterator .* Pass steps_per_epoch"):
        make_model().fit(once(), epochs=2, verbose=0)
    with pytest.raises(ValueError, match=r"a batch is \(x, y\), \(x, y, sample_weight\) or x"):
        make_model().fit([(x, y, y, y)], verbose=0)


def test_numpy_conversions():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((40, 4))  # float64: taken in the model's float32
    y = (x[:, 0] > 0).astype(np.int64)  # 1-D integer targets of a binary loss: float (n, 1)
    model = make_model()
    h = model.fit(x, y, epochs=1, verbose=0)
    assert np.isfinite(h.history["loss"][0])
    assert model.predict(x).dtype == np.float32

    clf = nn.Sequential([nn.Dense(3)])
    with pytest.raises(ValueError, match="needs a classification loss"):  # "accuracy" of a custom loss
        clf.compile("adam", lambda labels, logits: nn.sparse_categorical_crossentropy(labels, logits), ["accuracy"])
    encore.manual_seed(0)
    clf = nn.Sequential([nn.Dense(3, activation="linear")])
    clf.build((1, 4))
    clf.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    labels = rng.integers(0, 3, 40)
    clf.fit(x, labels, epochs=1, verbose=0)  # integer class ids stay integers


def test_on_batch_methods_and_results():
    x, y = make_data(16)
    model = make_model()
    loss, acc = model.train_on_batch(x, y)
    assert math.isfinite(loss) and 0 <= acc <= 1
    assert set(model.train_on_batch(x, y, return_dict=True)) == {"loss", "accuracy"}
    assert model.iterations == 2
    assert len(model.test_on_batch(x, y)) == 2
    assert model.predict_on_batch(x).shape == (16, 1)
    plain = make_model(metrics=())
    assert isinstance(plain.evaluate(x, y), float)
    assert plain.metrics_names == ["loss"]


def test_predict_without_compile_runs_in_inference_mode():
    encore.manual_seed(0)
    model = nn.Sequential([nn.Dense(4), nn.Dropout(0.5), nn.Dense(1)])
    x, _ = make_data(70)
    a, b = model.predict(x), model.predict(x, batch_size=7)
    assert np.allclose(a, b, atol=1e-6) and a.tobytes() == model.predict(x).tobytes()
    assert model.traced_steps["predict"]["traces"] == 3  # 32, 6 and 7 rows
    assert model.training  # predict leaves the module's mode alone


def test_compile_and_fit_errors():
    x, y = make_data(8)
    model = nn.Sequential([nn.Dense(1)])
    with pytest.raises(ValueError, match="compile the model first"):
        model.fit(x, y)
    with pytest.raises(ValueError, match="needs a loss"):
        model.compile("adam")
    with pytest.raises(ValueError, match="unknown loss 'hinge'"):
        model.compile("adam", "hinge")
    with pytest.raises(ValueError, match="unknown optimizer 'adagrad'"):
        model.compile("adagrad", "mse")
    with pytest.raises(ValueError, match="unknown metric"):
        model.compile("adam", "mse", ["f1"])
    with pytest.raises(ValueError, match="compile"):
        model.compile("adam", "mse", mode="lazy")
    with pytest.raises(TypeError, match=r"\[compile\] loss must be a name or a function .* got int"):
        model.compile("adam", 5)
    with pytest.raises(TypeError, match=r"\[compile\] a metric must be a name or a function .* got NoneType"):
        model.compile("adam", "mse", ["mae", None])
    model.compile("adam", "mse")
    with pytest.raises(encore.ShapeError):
        model.fit(x, y[:4], verbose=0)
    with pytest.raises(ValueError, match="validation_split"):
        model.fit(x, y, validation_split=1.0, verbose=0)


def test_compile_refuses_an_optimizer_without_the_models_parameters():
    x, y = make_data(8)
    model = nn.Sequential([nn.Dense(1)])
    model.build((1, 4))
    stray = encore.ones(1, requires_grad=True)
    with pytest.raises(ValueError, match=r"\[compile\] the sgd optimizer does not hold .*'dense.kernel', 'dense.bias'"):
        model.compile(optim.SGD([stray], lr=0.5), "mse")
    with pytest.raises(ValueError, match=r"parameter 'dense.bias':"):
        model.compile(optim.SGD(model.parameters()[:1], lr=0.5), "mse")
    # Compiled before build: checked once the first batch has built the model.
    lazy = nn.Sequential([nn.Dense(1)])
    lazy.compile(optim.SGD([stray], lr=0.5), "mse")
    with pytest.raises(ValueError, match=r"\[fit\] the sgd optimizer does not hold"):
        lazy.fit(x, y, verbose=0)
    named = nn.Sequential([nn.Dense(1)])
    named.compile("adam", "mse")
    named.fit(x, y, verbose=0)
    assert named.optimizer.iterations == 1


@pytest.mark.parametrize("mode", ["traced", "eager"])
def test_converting_a_trained_model_converts_its_optimizer_state(tmp_path, mode):
    x, y = make_data(40)
    model = make_model(mode=mode)
    model.fit(x, y, batch_size=20, verbose=0)
    model.to("float64")
    model.fit(x, y, batch_size=20, verbose=0)
    assert model.optimizer.iterations == 4
    assert {str(t.dtype) for n, t in model.optimizer.state().items() if n.endswith((".m", ".v"))} == {"float64"}
    model.save_checkpoint(tmp_path / "ck")
    model.load_checkpoint(tmp_path / "ck")
    # A hand-made optimizer is told what happened, and converts on request.
    net = nn.Sequential([nn.Dense(1)])
    net.build((1, 4))
    adam = optim.Adam(net.parameters(), lr=0.1)
    for dtype in ("float32", "float64"):
        net.to(dtype)
        adam.zero_grad()
        nn.mean_squared_error(encore.tensor(y.astype(dtype)), net(encore.tensor(x.astype(dtype)))).backward()
        if dtype == "float64":
            message = r"\[adam\] state 'dense.kernel.m' is float32 but its parameter is float64"
            with pytest.raises(TypeError, match=message):
                adam.step()
            with pytest.raises(TypeError, match=r"\[save_checkpoint\] state 'dense.kernel.m' is float32"):
                nn.save_checkpoint(net, tmp_path / "hand", adam)
            adam.match_param_dtypes()
        adam.step()
    assert adam.iterations == 2


class Recorder(callbacks.Callback):
    def __init__(self, stop_after=None):
        self.events = []
        self.stop_after = stop_after

    def on_train_begin(self, logs=None):
        self.events.append("train_begin")

    def on_epoch_begin(self, epoch, logs=None):
        self.events.append(f"epoch_begin {epoch}")

    def on_train_batch_end(self, batch, logs=None):
        self.events.append(f"batch {batch} {sorted(logs)}")

    def on_epoch_end(self, epoch, logs=None):
        self.events.append(f"epoch_end {epoch} {sorted(logs)}")
        logs["custom"] = float(epoch)
        if self.stop_after is not None and epoch >= self.stop_after:
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        self.events.append("train_end")


def test_python_callbacks():
    x, y = make_data(40)
    model = make_model()
    rec = Recorder(stop_after=1)
    h = model.fit(x, y, batch_size=20, epochs=5, callbacks=[rec], verbose=0)
    assert rec.model is model
    assert rec.events == [
        "train_begin", "epoch_begin 0", "batch 0 ['accuracy', 'loss']", "batch 1 ['accuracy', 'loss']",
        "epoch_end 0 ['accuracy', 'loss']", "epoch_begin 1", "batch 0 ['accuracy', 'loss']",
        "batch 1 ['accuracy', 'loss']", "epoch_end 1 ['accuracy', 'loss']", "train_end"]
    assert h.epoch == [0, 1] and h.history["custom"] == [0.0, 1.0]
    for junk, said in [(5, "a int"), ("x", "a str"), (None, "a NoneType"), (Recorder, "the class Recorder")]:
        with pytest.raises(TypeError, match=rf"\[fit\] callbacks\[1\] is {said}, not a callback"):
            model.fit(x, y, callbacks=[rec, junk], verbose=0)


def test_early_stopping_and_checkpoints(tmp_path):
    x, y = make_data(64)
    model = make_model(optimizer=lambda p: optim.Adam(p, lr=5.0))
    stop = callbacks.EarlyStopping(monitor="loss", patience=1, restore_best_weights=True)
    best = tmp_path / "best.safetensors"
    save = callbacks.ModelCheckpoint(best, monitor="loss", save_best_only=True)
    every = callbacks.ModelCheckpoint(str(tmp_path / "e{epoch}.safetensors"), monitor="loss")
    h = model.fit(x, y, batch_size=16, epochs=40, callbacks=[stop, save, every], verbose=0)
    assert 1 <= stop.stopped_epoch < 39 and len(h.epoch) == stop.stopped_epoch + 1
    assert stop.best == min(h.history["loss"])
    assert best.exists() and (tmp_path / f"e{len(h.epoch)}.safetensors").exists()
    # The restored best weights are those the best checkpoint holds.
    other = make_model(seed=9)
    nn.load(other, best)
    assert_same(params(other), params(model))
    with pytest.raises(ValueError, match="monitors 'val_loss'"):
        model.fit(x, y, epochs=1, callbacks=[callbacks.EarlyStopping()], verbose=0)


@pytest.mark.parametrize("schedule", ["builtin", "python"])
def test_learning_rate_schedule_without_retrace(schedule):
    x, y = make_data(40)
    sched = optim.warmup(optim.cosine_decay(0.05, 20, alpha=0.1), 3, start=0.01)
    fn = sched if schedule == "builtin" else (lambda step: 0.05 * 0.9 ** step)

    class Rates(callbacks.Callback):
        def __init__(self):
            self.seen = []

        def on_train_batch_begin(self, batch, logs=None):
            self.seen.append(self.model.optimizer.lr)

    runs = {}
    for mode in ("eager", "traced"):
        model = make_model(mode=mode)
        rates = Rates()
        h = model.fit(x, y, batch_size=8, epochs=5, callbacks=[callbacks.LearningRateScheduler(fn), rates],
                      verbose=0)
        runs[mode] = (rates.seen, params(model), h.history)
        if mode == "traced":
            assert model.traced_steps["train"]["traces"] == 1
    seen = runs["traced"][0]
    assert seen == [fn(s) for s in range(25)]
    assert runs["eager"][0] == seen and runs["eager"][2] == runs["traced"][2]
    assert_same(runs["eager"][1], runs["traced"][1])
    assert runs["traced"][2]["lr"][-1] == fn(24)


def test_schedules():
    assert optim.step_decay(0.1, 3, 0.5)(7) == 0.025
    assert optim.exponential_decay(0.1, 10, 0.5)(5) == pytest.approx(0.1 * 0.5 ** 0.5, rel=1e-15)
    assert optim.exponential_decay(0.1, 10, 0.5, staircase=True)(15) == 0.05
    c = optim.cosine_decay(1.0, 10, alpha=0.2)
    assert [c(0), c(10), c(50)] == [1.0, pytest.approx(0.2), pytest.approx(0.2)]
    assert c(5) == pytest.approx(0.8 * 0.5 * (1 + math.cos(math.pi * 0.5)) + 0.2)
    w = optim.warmup(optim.step_decay(0.1, 100, 0.5), 4)
    assert [w(0), w(2), w(4)] == [0.0, pytest.approx(0.05), 0.1]
    assert "warmup(4 steps" in repr(w)
    with pytest.raises(ValueError):
        optim.step_decay(0.1, 0, 0.5)


def test_batches_helper():
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    y = np.arange(10, dtype=np.int64)
    plain = encore.data.batches(x, y, batch_size=4)
    assert [b[0].shape[0] for b in plain] == [4, 4, 2]
    a = encore.data.batches(x, y, batch_size=4, shuffle=True, seed=5, epoch=1)
    b = encore.data.batches(x, y, batch_size=4, shuffle=True, seed=5, epoch=1)
    order = np.concatenate([by.numpy() for _, by in a])
    assert sorted(order) == list(range(10)) and list(order) != list(range(10))
    assert all((bx.numpy() == by.numpy()).all() for (bx, _), (by, _) in zip(a, b))
    assert all((bx.numpy()[:, 0] == 2 * by.numpy()).all() for bx, by in a)  # rows stay paired
    assert encore.data.batches(x, batch_size=8)[1][1] is None


def test_optimizers_from_python():
    def step(opt, p, g):
        p.grad = encore.tensor(g)
        opt.step()

    # AdamW: decoupled decay; RMSprop: Keras' formula; Adam's epsilon_hat: Keras' placement.
    p = encore.tensor([1.0, -2.0], requires_grad=True)
    step(optim.AdamW([p], lr=0.1, weight_decay=0.5), p, [0.0, 0.0])
    assert np.allclose(p.numpy(), [0.95, -1.9])
    p = encore.tensor([1.0], requires_grad=True)
    step(optim.RMSprop([p], lr=0.01), p, [0.5])
    assert p.item() == pytest.approx(1 - 0.01 * 0.5 / math.sqrt(0.1 * 0.25 + 1e-7), rel=1e-6)
    moved = []
    for hat in (False, True):
        p = encore.tensor([0.0], requires_grad=True)
        step(optim.Adam([p], lr=1.0, epsilon_hat=hat), p, [1e-6])
        moved.append(-p.item())
    assert moved[0] == pytest.approx(1e-6 / (1e-6 + 1e-7), rel=1e-5)
    assert moved[1] == pytest.approx(math.sqrt(1e-3) * 1e-6 / (math.sqrt(1e-3) * 1e-6 + 1e-7), rel=1e-4)
    # Clipping by global norm (3, 4 -> norm 5) and by value.
    p = encore.tensor([0.0, 0.0], requires_grad=True)
    opt = optim.SGD([p], lr=1.0, global_clipnorm=1.0)
    assert opt.global_clipnorm == 1.0 and opt.clipvalue is None and opt.kind == "sgd"
    step(opt, p, [3.0, 4.0])
    assert np.allclose(p.numpy(), [-0.6, -0.8], atol=1e-6)
    p = encore.tensor([0.0, 0.0], requires_grad=True)
    step(optim.SGD([p], lr=1.0, clipvalue=0.5), p, [3.0, -0.25])
    assert np.allclose(p.numpy(), [-0.5, 0.25])
    with pytest.raises(ValueError, match="not both"):
        optim.SGD([p], global_clipnorm=1.0, clipvalue=1.0)
    # Optimizer state round-trips through load_state, strictly.
    q = encore.tensor([1.0], requires_grad=True)
    q.name = "q"
    adam = optim.Adam([q], lr=0.1)
    step(adam, q, [1.0])
    other = optim.Adam([q], lr=0.5)
    other.load_state({k: v.clone() for k, v in adam.state().items()})
    assert other.lr == 0.1 and other.iterations == 1
    with pytest.raises(ValueError, match="not state of this optimizer"):
        other.load_state({**adam.state(), "q.momentum": encore.zeros(1)})
    # Values that would make the next step's weights NaN are refused, and nothing changes.
    bad = [("step", encore.tensor(-5)), ("q.v", encore.tensor([-1.0])), ("q.m", encore.tensor([math.inf])),
           ("lr", encore.tensor(math.nan, dtype="float64"))]
    for key, value in bad:
        with pytest.raises(ValueError, match=rf"\[adam\] .*{key if key != 'lr' else 'learning rate'}"):
            other.load_state({**adam.state(), key: value})
    assert other.iterations == 1 and other.state()["q.v"].item() > 0
    for make, said in [(lambda: optim.SGD([q], lr=math.inf), r"\[sgd\] learning rate must be finite"),
                       (lambda: optim.Adam([q], lr=math.nan), r"\[adam\] learning rate must be finite"),
                       (lambda: optim.RMSprop([q], lr=-1.0), r"\[rmsprop\] learning rate"),
                       (lambda: optim.SGD([q], momentum=-0.5), r"\[sgd\] momentum"),
                       (lambda: optim.SGD([q], momentum=math.inf), r"\[sgd\] momentum"),
                       (lambda: optim.Adam([q], beta1=1.0), r"\[adam\] needs 0 <= beta < 1"),
                       (lambda: optim.AdamW([q], beta2=-0.1), r"\[adamw\] needs 0 <= beta < 1"),
                       (lambda: optim.Adam([q], epsilon=math.inf), r"\[adam\] needs .* epsilon")]:
        with pytest.raises(ValueError, match=said):
            make()
    with pytest.raises(ValueError, match=r"\[adam\] learning rate must be finite"):
        other.lr = math.inf
