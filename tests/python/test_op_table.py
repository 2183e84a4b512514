"""Every op function of the Python module, called as each of its row's test cases says (its
example and its edge cases: the same cases that drive the C++ gradcheck, parity and replay
tests, tests/cpp/test_op_table.cpp), gives bitwise the result of the C++ call; so does its
Tensor method. The generated package files
(_ops.py, _C.pyi) cover every op."""

import ast
import math
import pathlib

import numpy as np
import pytest

import encore

OPS = encore._C._op_functions


CASES = [(name, i) for name in OPS for i in range(len(encore._C._op_examples(name)))]


def call_args(name, index):
    inputs, args, as_list = encore._C._op_examples(name)[index]
    kwargs = eval(f"dict({args})", {"__builtins__": {}, "dict": dict, "inf": math.inf, "nan": math.nan})
    return inputs, ([inputs] if as_list else list(inputs)), kwargs


def same(a, b):
    a = a if isinstance(a, (tuple, list)) else (a,)
    b = b if isinstance(b, (tuple, list)) else (b,)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.shape == y.shape and x.dtype == y.dtype
        assert np.array_equal(x.numpy(), y.numpy(), equal_nan=True)


@pytest.mark.parametrize("name, index", CASES, ids=[f"{n}-{i}" for n, i in CASES])
def test_python_call_matches_cpp(name, index):
    inputs, positional, kwargs = call_args(name, index)
    encore.manual_seed(11)
    expected = encore._C._run_op_example(name, index, inputs)
    encore.manual_seed(11)
    got = getattr(encore, name)(*positional, **kwargs)
    same(got, expected)
    if name in encore._C._op_methods:
        encore.manual_seed(11)
        same(getattr(positional[0], name)(*positional[1:], **kwargs), expected)


def test_every_row_is_exported_and_stubbed():
    package = pathlib.Path(encore.__file__).parent
    assert set(encore._ops.__all__) == set(OPS)
    for name in OPS:
        assert getattr(encore, name) is getattr(encore._C, name)
    stub = ast.parse((package / "_C.pyi").read_text())
    functions = {n.name for n in stub.body if isinstance(n, ast.FunctionDef)}
    tensor = next(n for n in stub.body if isinstance(n, ast.ClassDef) and n.name == "Tensor")
    methods = {n.name for n in tensor.body if isinstance(n, ast.FunctionDef)}
    assert set(OPS) <= functions
    assert set(encore._C._op_methods) <= methods


def test_builtins_are_not_shadowed_by_star_imports():
    assert "sum" not in encore.__all__ and "max" not in encore.__all__ and "mean" in encore.__all__
    assert encore.sum is encore._C.sum


def test_argument_errors_name_the_op_and_the_argument():
    x = encore.ones(2, 3)
    with pytest.raises(TypeError, match=r"^\[sum\] got an unexpected keyword argument 'axes'$"):
        encore.sum(x, axes=0)
    with pytest.raises(TypeError, match=r"^\[transpose\] missing required argument 'axis1'$"):
        encore.transpose(x, 0)
    with pytest.raises(TypeError, match=r"^\[softmax\] takes at most 2 positional arguments, got 3$"):
        encore.softmax(x, 0, 1)
    with pytest.raises(TypeError, match=r"^\[softmax\] takes at most 1 positional arguments, got 2$"):
        x.softmax(0, 1)
    with pytest.raises(TypeError, match=r"^\[softmax\] got multiple values for argument 'axis'$"):
        encore.softmax(x, 0, axis=1)
    with pytest.raises(TypeError, match=r"^\[sum\] argument 'keepdims' must be a bool, got str$"):
        x.sum(keepdims="yes")
    with pytest.raises(TypeError, match=r"^\[leaky_relu\] argument 'alpha' must be a number, got str$"):
        encore.leaky_relu(x, "0.1")
    with pytest.raises(ValueError, match=r"^\[transpose\] argument 'axis0' = 36893488147419103232 is out of"):
        encore.transpose(x, 2**65, 0)
    with pytest.raises(ValueError, match=r"^\[sum\] an empty axis list reduces nothing"):
        x.sum(axis=())


def test_arguments_convert_like_python():
    x = encore.tensor([[1.0, -2.0], [3.0, 4.0]])
    assert x.sum(axis=np.int64(1)).tolist() == [-1.0, 7.0]           # NumPy ints are ints
    assert x.sum(axis=[0, 1], keepdims=np.bool_(True)).shape == (1, 1)
    assert encore.leaky_relu(x, alpha=np.float32(0.5)).tolist()[0][1] == -1.0
    assert encore.zeros(range(2, 4)).shape == (2, 3)                   # any sequence of ints
    assert encore.full((2,), 2**62, dtype="int64").tolist() == [2**62] * 2   # ints stay exact
    assert encore.add(np.ones(2, np.float32), 1).tolist() == [2.0, 2.0]      # arrays are tensors
    assert encore.concat((x, x), axis=1).shape == (2, 4)
