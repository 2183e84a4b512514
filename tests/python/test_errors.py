"""C++ errors surface as natural Python exceptions with the C++ messages; bad input never
crashes the interpreter."""

import threading
import time

import numpy as np
import pytest

import encore
from encore import nn


def test_exception_hierarchy():
    assert issubclass(encore.Error, Exception) and not issubclass(encore.Error, RuntimeError)
    builtin = {encore.ShapeError: ValueError, encore.DTypeError: TypeError,
               encore.InvalidValueError: ValueError, encore.OutOfMemoryError: MemoryError,
               encore.DeviceError: RuntimeError, encore.UnsupportedError: RuntimeError,
               encore.BackendError: RuntimeError}
    for cls, base in builtin.items():
        assert issubclass(cls, encore.Error) and issubclass(cls, base), cls
        assert cls.__module__ == "encore" and cls.__name__ in encore.__all__


def test_every_encore_error_is_caught_by_encore_error():
    cases = [
        (encore.ShapeError, lambda: encore.ones(2, 3) + encore.ones(4)),
        (encore.DTypeError, lambda: encore.ones(2, dtype=encore.int32) + encore.ones(2)),
        (encore.InvalidValueError, lambda: encore.ones(3).item()),
        (encore.OutOfMemoryError, lambda: encore.zeros(2**46)),
        (encore.ShapeError, lambda: nn.binary_crossentropy(encore.ones(2), encore.ones(3))),
    ]
    if not encore.cuda.is_available():
        cases.append((encore.DeviceError, lambda: encore.ones(2, device="cuda")))
    for kind, fail in cases:
        with pytest.raises(encore.Error) as info:
            fail()
        assert type(info.value) is kind
        assert str(info.value).startswith("[")
    # ... and each still by its builtin base.
    with pytest.raises(MemoryError):
        encore.zeros(2**46)
    with pytest.raises(ValueError):
        encore.ones(3).item()


def test_messages_name_the_op_and_shapes():
    with pytest.raises(encore.ShapeError, match=r"\[add\] shapes \(2, 3\) and \(4,\) cannot be broadcast"):
        encore.ones(2, 3) + encore.ones(4)
    with pytest.raises(ValueError, match=r"\[matmul\]"):
        encore.ones(2, 3) @ encore.ones(4, 2)
    with pytest.raises(encore.DTypeError, match=r"\[add\] dtypes differ"):
        encore.ones(2, dtype=encore.int32) + encore.ones(2)
    with pytest.raises(TypeError):
        encore.ones(2, dtype=encore.int32) + encore.ones(2)
    with pytest.raises(ValueError, match=r"\[conv1d\]"):
        encore.conv1d(encore.ones(1, 8, 3), encore.ones(3, 4, 2))
    with pytest.raises(ValueError, match=r"\[clip\]"):
        encore.clip(encore.ones(1), 2, 1)
    with pytest.raises(ValueError, match=r"\[reshape\]"):
        encore.ones(6).reshape(4, 2)
    for make in (encore.zeros, encore.ones, encore.randn):
        with pytest.raises(encore.ShapeError, match=r"negative dimension"):
            make(2, -1)  # -1 means "infer" only for reshape
    with pytest.raises(encore.ShapeError, match="axis 5 is out of range"):
        encore.ones(2).sum(axis=5)


def test_plain_value_errors():
    with pytest.raises(ValueError) as info:
        encore.ones(3).item()
    assert not isinstance(info.value, encore.ShapeError) and "[item]" in str(info.value)
    with pytest.raises(ValueError):
        encore.arange(0, 1, 0)


def test_device_errors():
    if encore.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(encore.DeviceError):
        encore.ones(2, device="cuda")
    with pytest.raises(RuntimeError):
        encore.ones(2).to("cuda:0")
    with pytest.raises(encore.DeviceError, match="cannot parse device"):
        encore.ones(2, device="tpu")
    with pytest.raises(encore.DeviceError):
        encore.Device("cuda:999")
    with pytest.raises(TypeError):
        encore.ones(2, device=3.5)


def test_none_and_wrong_types_are_type_errors():
    x = encore.ones(2)
    with pytest.raises(TypeError):
        encore.exp(None)
    with pytest.raises(TypeError):
        x + None
    with pytest.raises(TypeError):
        x + "a"
    with pytest.raises(TypeError):
        encore.matmul(x, [1, 2])
    with pytest.raises(TypeError):
        encore.zeros("3")
    with pytest.raises(TypeError):
        encore.zeros(2.5)
    with pytest.raises(TypeError):
        encore.zeros(2, dtype="complex64")
    with pytest.raises(TypeError):
        encore.ones(2, dtype=object)
    with pytest.raises(TypeError):
        nn.Dense("ten")
    with pytest.raises(TypeError):
        nn.Sequential([None])
    with pytest.raises(TypeError):
        x.backward(grad=3)
    with pytest.raises(TypeError):
        x.to(3.5)
    with pytest.raises(TypeError):
        encore.tensor(object())
    with pytest.raises(TypeError):
        encore.tensor(["a"])
    with pytest.raises(ValueError):
        encore.tensor([[1, 2], [3]])  # ragged


def test_bad_and_huge_sizes():
    with pytest.raises(encore.ShapeError):
        encore.zeros(-1)
    with pytest.raises(encore.ShapeError, match="too many elements"):
        encore.zeros(2**40, 2**40)
    with pytest.raises(encore.ShapeError):
        encore.zeros(2**70)
    with pytest.raises(encore.ShapeError, match="rank"):
        encore.zeros(*([1] * 9))
    with pytest.raises(MemoryError):
        encore.zeros(2**46)  # 256 TiB: the allocation fails, encore stays usable
    with pytest.raises(MemoryError):
        encore.arange(0, 2**46)
    with pytest.raises(encore.ShapeError):
        encore.ones(4).reshape(2**40, 2**40)
    assert encore.ones(2).sum().item() == 2


def test_mode_and_misc_errors():
    with pytest.raises(ValueError):
        encore.autotune.set_policy("fastest")
    with pytest.raises(ValueError):
        encore.activation(encore.ones(1), "swish")
    with pytest.raises(ValueError):
        encore.bucket(1, [])
    with pytest.raises(ValueError):
        encore.trace(lambda x: x, max_cached=0)


def test_trace_called_from_two_threads_is_serialized_not_interleaved():
    started, release = threading.Event(), threading.Event()
    order, results = [], []

    @encore.trace
    def slow(x):
        order.append("enter")
        started.set()
        release.wait(5)
        order.append("exit")
        return x + 1

    call = lambda: results.append(slow(encore.ones(1)).tolist())  # noqa: E731
    first, second = threading.Thread(target=call), threading.Thread(target=call)
    first.start()
    assert started.wait(5)
    second.start()
    time.sleep(0.2)
    assert order == ["enter"]  # the second call waits for the first to finish
    release.set()
    first.join()
    second.join()
    # The first call ran eagerly and traced; the second replayed.
    assert order == ["enter", "exit", "enter", "exit"]
    assert results == [[2.0], [2.0]]


def test_integer_division_by_zero_does_not_trap():
    # x86 raises SIGFPE for integer division by zero and for INT64_MIN / -1.
    a = encore.tensor([7, -7, 3], dtype=encore.int64)
    assert (a / encore.tensor([0, 0, 0], dtype=encore.int64)).tolist() == [0, 0, 0]
    assert (a / 0).tolist() == [0, 0, 0]
    b = encore.tensor([7, -2**31], dtype=encore.int32)
    assert (b / encore.tensor([2, -1], dtype=encore.int32)).tolist() == [3, -2**31]
    c = encore.tensor([-2**63], dtype=encore.int64)
    assert (c / -1).tolist() == [-2**63]


def test_shape_from_sequences_that_make_their_items():
    # Iterating such sequences yields temporaries: reading them after the fact crashed.
    class Dims:  # a sequence whose items are fresh ints (> 256: not cached by CPython)
        def __len__(self):
            return 2

        def __getitem__(self, i):
            if i >= 2:
                raise IndexError(i)
            return [300, 2][i] + 0 * 10**30

    assert encore.zeros(Dims()).shape == (300, 2)
    assert encore.ones(range(2, 4)).shape == (2, 3)
    with pytest.raises(TypeError, match="shape entries must be ints"):
        encore.zeros(encore.ones(2))
    with pytest.raises(TypeError, match="shape entries must be ints"):
        encore.zeros(4).reshape(encore.ones(2))


def test_sequential_cannot_contain_itself():
    s = nn.Sequential([nn.Dense(2)])
    with pytest.raises(ValueError, match="cannot add a model to itself"):
        s.add(s)
    outer = nn.Sequential([s])
    with pytest.raises(ValueError, match="cannot add a model to itself"):
        s.add(outer)
    assert len(s) == 1 and s(encore.ones(1, 3)).shape == (1, 2)


def test_none_is_not_a_dtype_or_a_value():
    t = encore.ones(3)
    with pytest.raises(TypeError, match="got None"):
        t.to(None)
    with pytest.raises(TypeError, match="got None"):
        nn.Dense(2).to(None)
    with pytest.raises(TypeError, match="cannot assign None"):
        t[0] = None
    assert t.tolist() == [1.0, 1.0, 1.0]


def test_error_messages_that_are_not_utf8(tmp_path):
    d = nn.Dense(4)
    d(encore.ones(1, 3))
    path = tmp_path / "p.bin"
    nn.save(d, path)
    data = path.read_bytes()
    kinds = set()
    for i in range(len(data)):
        corrupt = bytearray(data)
        corrupt[i] ^= 0xFF
        path.write_bytes(bytes(corrupt))
        try:
            nn.load(d, path)
        except (ValueError, TypeError, RuntimeError, MemoryError) as e:
            kinds.add(type(e))
    assert kinds and not any(issubclass(k, UnicodeError) for k in kinds)


def test_traced_function_inspected_or_cleared_while_running():
    @encore.trace
    def f(x):
        with pytest.raises(ValueError, match="while a call to it runs"):
            f.clear()
        return x * 2

    assert f(encore.ones(2)).tolist() == [2.0, 2.0]

    @encore.trace(retrace_warning=0)  # cleared over and over: every call may retrace
    def g(x):
        return (x @ x.T).sum()

    stop = threading.Event()
    errors = []

    def work():
        while not stop.is_set():
            try:
                g(encore.ones(96, 96))
            except RuntimeError:
                pass

    worker = threading.Thread(target=work)
    worker.start()
    try:
        for _ in range(300):
            for inspect in (g.clear, g.graph, g.explain, lambda: g.stats, lambda: g.cache_size):
                try:
                    inspect()
                except (RuntimeError, ValueError) as e:
                    errors.append(str(e))
    finally:
        stop.set()
        worker.join()
    assert all("[trace]" in e for e in errors)
    assert g.stats["calls"] > 0


def test_losses_report_under_their_own_name():
    p = encore.full((3,), 0.5)
    with pytest.raises(encore.DTypeError, match=r"^\[binary_crossentropy\] targets \(3,\) int64 on cpu "
                       r"and predictions \(3,\) float32 on cpu differ in dtype"):
        nn.binary_crossentropy(encore.tensor([1, 0, 1]), p)
    with pytest.raises(encore.ShapeError, match=r"^\[mean_squared_error\] targets \(3,\) and predictions \(3, 1\)"):
        nn.mean_squared_error(p, encore.full((3, 1), 0.5))
    with pytest.raises(encore.DTypeError, match=r"^\[sparse_categorical_crossentropy\] labels must be int32 or int64"):
        nn.sparse_categorical_crossentropy(encore.zeros(2), encore.zeros(2, 5))
    with pytest.raises(ValueError, match=r"^\[sparse_categorical_crossentropy\] label 7 \(element 1 of labels "
                       r"\(2,\)\) is out of range for 5 classes"):
        nn.sparse_categorical_crossentropy(encore.tensor([1, 7]), encore.zeros(2, 5))
    with pytest.raises(ValueError, match=r"^\[sparse_categorical_crossentropy\] label -1"):
        nn.sparse_categorical_crossentropy(np.array([-1, 0], dtype=np.int32), encore.zeros(2, 5),
                                           from_logits=False)


def test_a_list_where_a_tensor_is_expected_gives_a_short_message():
    t = encore.ones(2, 2)
    huge = [0.5] * 1_000_000
    with pytest.raises(TypeError) as info:
        encore.matmul(t, huge)
    assert str(info.value) == ("[matmul] expected a Tensor or NumPy array for argument 'b', got list "
                               "(convert with encore.tensor(...))")
    with pytest.raises(TypeError, match=r"^\[matmul\] expected a Tensor or NumPy array for argument 'a', got tuple"):
        encore.matmul(tuple(huge), t)
    with pytest.raises(TypeError, match=r"^\[matmul\] .* for argument 'b', got list"):
        encore.matmul(t, b=huge)
    with pytest.raises(TypeError, match=r"^\[matmul\] .* for argument 'b', got list"):
        t.matmul(huge)  # a method: self is the first argument
    with pytest.raises(TypeError, match=r"^\[add\] .* for argument 'b', got list"):
        encore.add(t, huge)  # overloaded: float or Tensor
    with pytest.raises(TypeError, match=r"^\[binary_crossentropy\] .* argument 'y_true', got list"):
        nn.binary_crossentropy(huge, t)
    with pytest.raises(TypeError, match=r"^\[exp\] .* argument 'x', got None$"):
        encore.exp(None)
    # Other mismatches: the argument types and the accepted signatures, never the values.
    with pytest.raises(TypeError) as info:
        encore.transpose(t, huge, 1)
    assert str(info.value) == "[transpose] argument 'axis0' must be an int, got list"
    with pytest.raises(TypeError, match=r"^\[Dense\] argument 'units' must be an int, got list$"):
        nn.Dense(huge)
    with pytest.raises(TypeError, match=r"^\[requires_grad\] cannot be set to a value of type list; expected bool"):
        t.requires_grad = huge
    # Operators keep Python's protocol (NotImplemented, then Python's own message).
    with pytest.raises(TypeError, match="unsupported operand"):
        t @ huge
    # The functions still work.
    assert encore.matmul(t, np.ones((2, 2), np.float32)).tolist() == [[2, 2], [2, 2]]


def test_an_unnamed_layer_reports_under_its_type():
    dense = nn.Dense(2)
    dense(encore.ones(1, 3))
    with pytest.raises(encore.ShapeError, match=r"^\[dense\] input \(1, 4\) has 4 features"):
        dense(encore.ones(1, 4))
    lstm = nn.LSTM(2)
    lstm(encore.ones(1, 2, 3))
    with pytest.raises(encore.ShapeError, match=r"^\[lstm\] input \(1, 2, 4\)"):
        lstm(encore.ones(1, 2, 4))
    model = nn.Sequential([nn.Dense(2), nn.Dense(2)])
    model(encore.ones(1, 3))
    with pytest.raises(encore.ShapeError, match=r"^\[dense_1\] input \(1, 3\)"):
        model[1](encore.ones(1, 3))


def test_seeds_must_be_non_negative():
    for bad in (-1, -5, 2**64):
        with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*64\)"):
            encore.manual_seed(bad)
        with pytest.raises(encore.InvalidValueError, match=r"^\[Generator\] seed"):
            encore.Generator(bad)
        with pytest.raises(ValueError, match=r"^\[manual_seed\] seed"):
            encore.Generator(1).manual_seed(bad)
    with pytest.raises(TypeError, match="seed must be an int, got float"):
        encore.manual_seed(1.5)
    assert encore.Generator(2**64 - 1).seed == 2**64 - 1
    assert encore.Generator(np.int64(7)).seed == 7
    encore.manual_seed(3)
    assert encore.default_generator().seed == 3


def test_manual_seed_after_a_failed_cuda_generator():
    if encore.cuda.is_available():
        pytest.skip("a GPU is present")
    for _ in range(2):
        with pytest.raises(encore.DeviceError):
            encore.randn(2, device="cuda")
    encore.manual_seed(4)  # dereferenced the generator that failed to be made
    assert encore.default_generator().seed == 4
    a = encore.randn(3).tolist()
    encore.manual_seed(4)
    assert encore.randn(3).tolist() == a


def test_backward_gradient_of_another_dtype_or_device():
    w = encore.ones(2, requires_grad=True)
    y = w * 2
    with pytest.raises(encore.DTypeError, match=r"^\[backward\] gradient \(2,\) float64 on cpu does not match "
                       r"the dtype of \(2,\) float32 on cpu"):
        y.backward(encore.ones(2, dtype=encore.float64))
    y.backward(encore.ones(2))
    assert w.grad.tolist() == [2, 2]


def test_a_parameter_listed_twice_in_an_optimizer():
    model = nn.Sequential([nn.Dense(2)])
    model.build((1, 3))
    params = model.parameters()
    for make in (lambda p: encore.optim.SGD(p, lr=0.1), lambda p: encore.optim.Adam(p)):
        with pytest.raises(ValueError, match=r"parameter 'dense.kernel' is listed twice \(positions 0 and 2\)"):
            make(params + [params[0]])
