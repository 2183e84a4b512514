"""Python subclasses of nn.Module (issue 11): attributes registered with stable names, custom
layers with add_weight and a build hook, real C++ modules (in Sequential, under encore.trace, in
fit), lifetimes, and train()/eval() per module as a guard of traced graphs."""

import gc
import weakref

import numpy as np
import pytest

import encore
from encore import nn, optim


class Scale(nn.Module):
    """A custom layer: one weight per feature, made in build."""

    def build(self, input_shape):
        self.gain = self.add_weight((input_shape[-1],), initializer="ones")
        self.offset = self.add_weight((input_shape[-1],), initializer="zeros", name="shift")  # -> "offset"
        super().build(input_shape)  # as Keras layers end their build

    def forward(self, x):
        return x * self.gain + self.offset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Dense(8, activation="relu")
        self.scale = Scale()
        self.drop = nn.Dropout(0.5)
        self.head = nn.Dense(1)
        self.temperature = encore.ones(1, requires_grad=True)
        self.note = "not a parameter"

    def forward(self, x):
        return self.head(self.drop(self.scale(self.body(x)))) * self.temperature


def test_attributes_are_registered_with_stable_names():
    encore.manual_seed(0)
    net = Net()
    assert net.build((2, 4)) == (2, 1)
    # The module's own parameters first, then its children's (as PyTorch lists them).
    assert [n for n, _ in net.named_parameters()] == [
        "temperature", "body.kernel", "body.bias", "scale.gain", "scale.offset", "head.kernel", "head.bias"]
    assert net.type_name == "net" and net.scale.type_name == "scale" and net.scale.name == "scale"
    assert [name for name, _ in net.children()] == ["body", "scale", "drop", "head"]
    assert net.parameters()[3].name == "scale.gain"
    # Reassigning replaces in place; other values unregister; del unregisters.
    net.head = nn.Dense(1)
    net.head.build((2, 8))
    assert [n for n, _ in net.named_parameters()][5] == "head.kernel"
    net.temperature = 2.0
    assert "temperature" not in dict(net.named_parameters())
    del net.drop
    assert [name for name, _ in net.children()] == ["body", "scale", "head"]
    assert net.note == "not a parameter"


def test_lists_of_modules_and_errors():
    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = [nn.Dense(3), nn.Dense(2)]

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x

    s = Stack()
    s.build((1, 4))
    assert [n for n, _ in s.named_parameters()] == ["blocks.0.kernel", "blocks.0.bias", "blocks.1.kernel",
                                                    "blocks.1.bias"]
    assert isinstance(s.blocks, tuple)  # appending later would not register: a tuple says so

    class Early(nn.Module):
        def __init__(self):
            self.dense = nn.Dense(1)

    with pytest.raises(TypeError, match=r"Early: call super\(\).__init__\(\) before assigning attributes"):
        Early()

    class NoForward(nn.Module):
        pass

    with pytest.raises(encore.UnsupportedError, match=r"\[no_forward\] defines no forward"):
        NoForward()(encore.ones((1, 2)))

    class CallsItself(nn.Module):
        def forward(self, x):
            return self(x)

    with pytest.raises(encore.UnsupportedError, match=r"\[calls_itself\] .* or its forward calls the module itself"):
        CallsItself()(encore.ones((1, 2)))

    class Wrong(nn.Module):
        def forward(self, x):
            return 1.0

    with pytest.raises(TypeError, match="forward returned a float, not a Tensor"):
        Wrong()(encore.ones((1, 2)))

    class Loop(nn.Module):
        def forward(self, x):
            return x

    loop = Loop()
    with pytest.raises(ValueError, match="holds it"):
        loop.me = loop
    computed = encore.ones(2, requires_grad=True) * 2
    with pytest.raises(ValueError, match="is computed from other tensors"):
        loop.w = computed
    with pytest.raises(ValueError, match="for subclasses of nn.Module"):
        nn.Dense(1).add_weight((2,))
    with pytest.raises(ValueError, match="unknown initializer"):
        loop.add_weight((2,), initializer="he_normal")
    w = loop.add_weight((2, 2), initializer=np.eye(2))
    assert w.requires_grad and w.numpy().tolist() == [[1, 0], [0, 1]]
    loop.add_weight((3,), name="bias")
    loop.add_weight((3,))
    assert [n for n, _ in loop.named_parameters()] == ["weight", "bias", "weight_1"]


def test_build_hook_returning_a_shape_and_inheritance():
    class Base(nn.Module):
        def build(self, input_shape):
            self.w = self.add_weight((input_shape[-1], 2))
            return (input_shape[0], 2)

        def forward(self, x):
            return x @ self.w

    class Derived(Base):
        def build(self, input_shape):
            shape = super().build(input_shape)  # the parent's hook
            self.b = self.add_weight((2,), initializer="zeros")
            return shape

        def forward(self, x):
            return super().forward(x) + self.b

    d = Derived()
    assert d.build((3, 5)) == (3, 2)
    assert [n for n, _ in d.named_parameters()] == ["w", "b"] and d.built
    assert d(encore.ones((4, 5))).shape == (4, 2)


def test_python_modules_inside_sequential_outlive_their_python_name():
    encore.manual_seed(0)
    seq = nn.Sequential([nn.Dense(3), Scale(), nn.Dense(1)])
    ref = weakref.ref(seq[1])
    gc.collect()
    assert ref() is not None  # the Sequential keeps the Python object alive
    seq.build((2, 4))
    assert [n for n, _ in seq.named_parameters()][2:4] == ["scale.gain", "scale.offset"]
    assert seq(encore.ones((2, 4))).shape == (2, 1)
    del seq
    gc.collect()
    assert ref() is None


def test_compiled_python_module_is_collected():
    net = Net()
    net.compile("adam", lambda y, p: nn.mean_squared_error(y, p * 1.0), metrics=[lambda y, p: (p - y).abs().mean()])
    net.fit(np.ones((8, 4), np.float32), np.ones((8, 1), np.float32), epochs=1, verbose=0)
    ref = weakref.ref(net)
    del net
    gc.collect()
    assert ref() is None


def run_training(traced, mode_schedule, seed=3):
    """A hand-written loop over a Python model: eager or traced, switching train/eval."""
    encore.manual_seed(seed)
    net = Net()
    net.build((4, 4))
    opt = optim.Adam(net.parameters(), lr=0.05)

    def step(x, y):
        opt.zero_grad()
        loss = nn.mean_squared_error(y, net(x))
        loss.backward()
        opt.step()
        return loss

    f = encore.trace(step) if traced else step
    rng = np.random.default_rng(0)
    out = []
    for on in mode_schedule:
        net.train(on)
        x = rng.standard_normal((4, 4)).astype(np.float32)
        y = rng.standard_normal((4, 1)).astype(np.float32)
        out.append(f(x, y).numpy().copy())
    out += [p.numpy().copy() for p in net.parameters()]
    out.append(encore.default_generator().state.numpy().copy())
    return out, f


def test_train_eval_switching_traced_equals_eager_bitwise():
    schedule = [True, False, False, True, False, True, True]
    eager, _ = run_training(False, schedule)
    traced, f = run_training(True, schedule)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(eager, traced))
    assert f.stats["traces"] == 2  # one graph per mode, then replays
    assert "'drop' is in inference mode now (training when traced)" in f.explain()


def test_training_property_is_a_guard():
    class Noisy(nn.Module):
        """Reads its own mode: adds 1 in training."""

        def forward(self, x):
            return x + 1.0 if self.training else x

    m = Noisy()
    f = encore.trace(lambda x: m(x))
    x = encore.zeros(2)
    assert f(x).tolist() == [1, 1]
    m.eval()
    assert not m.training and f(x).tolist() == [0, 0]
    m.train()
    assert f(x).tolist() == [1, 1] and f.stats["traces"] == 2
    with encore.training(False):
        assert not m.training and f(x).tolist() == [0, 0]


def test_a_traced_function_retraces_when_a_module_it_ran_changes():
    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = nn.Dense(2)

        def forward(self, x):
            return self.head(x)

    m = Head()
    m.build((1, 3))
    f = encore.trace(lambda x: m(x))
    x = encore.ones(1, 3)
    f(x), f(x)
    old = m.head  # alive: its captured weights alone would not tell
    m.head = nn.Dense(7)
    assert f(x).shape == m(x).shape == (1, 7)
    assert f.stats["traces"] == 2
    assert f.stats["records"][-1]["reason"] == "a child module or parameter of 'head' was set or removed"
    m.head = old
    assert f(x).tolist() == m(x).tolist() and f.stats["traces"] == 3
    f(x)
    assert f.stats["traces"] == 3  # unchanged since: replayed
    g = encore.trace(lambda x: m(x), max_cached=2)
    for _ in range(5):
        m.head, old = old, m.head
        assert g(x).tolist() == m(x).tolist()
    assert g.stats["traces"] == 5 and g.stats["evictions"] == 0  # a graph of former parts is dropped, not kept


def test_the_call_that_traces_returns_copies_as_replays_do():
    held = {"state": encore.zeros(3)}
    state = held["state"]

    def f(x):
        with encore.no_grad():
            held["state"] += x  # in place (no grad): the captured buffer is written
        return held["state"][0:2], held["state"]

    t = encore.trace(f)
    for _ in range(3):
        view, whole = t(encore.ones(3))
        with encore.no_grad():
            view *= 0.0  # a copy on every call: the captured state is not written
        assert not whole.requires_grad and whole.data_ptr() != state.data_ptr()
    assert state.tolist() == [3.0, 3.0, 3.0]


def test_module_modes():
    net = Net()
    assert net.training and net.drop.training  # modules start in training mode
    assert net.eval() is net and not net.drop.training
    net.drop.train()
    assert net.drop.training and not net.training
    with encore.training(False):
        assert not net.drop.training
    # fit trains in training mode and gives the modes back; predict runs in inference mode.
    net.eval()
    net.compile("sgd", "mse")
    x = np.ones((4, 4), np.float32)
    net.fit(x, np.ones((4, 1), np.float32), epochs=1, verbose=0)
    assert not net.training
    assert net.predict(x).tobytes() == net.predict(x).tobytes()


def test_fit_a_python_model_traced_equals_eager():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((50, 4)).astype(np.float32)
    y = rng.standard_normal((50, 1)).astype(np.float32)
    histories = []
    for mode in ("eager", "traced"):
        encore.manual_seed(5)
        net = Net()
        net.compile("adam", "mse", ["mae"], mode=mode)
        histories.append((net.fit(x, y, batch_size=16, epochs=3, verbose=0).history,
                          [p.numpy().tobytes() for p in net.parameters()]))
    assert histories[0] == histories[1]
