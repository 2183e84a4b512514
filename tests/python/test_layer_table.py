"""Every layer class of encore.nn, made as its row's example says (the example that drives the C++
layer table: tests/cpp/test_layer_table.cpp), gives bitwise the output of the C++ layer made the
same way; the classes, their signatures, docstrings and stubs come from the layer rows."""

import ast
import inspect
import math
import pathlib

import numpy as np
import pytest

import encore
from encore import nn

LAYERS = encore._C._layer_rows()


@pytest.mark.parametrize("name", LAYERS)
def test_python_layer_matches_cpp(name):
    args, from_args, x, expected = encore._C._layer_example(name, 5)
    if not from_args:
        pytest.skip(f"{name}'s example is made in C++ (it takes a layer)")
    kwargs = eval(f"dict({args})", {"__builtins__": {}, "dict": dict, "inf": math.inf, "nan": math.nan})
    encore.manual_seed(5)
    got = getattr(nn, name)(**kwargs)(x)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert np.array_equal(got.numpy(), expected.numpy(), equal_nan=True)


def test_classes_docstrings_and_stubs_come_from_the_rows():
    package = pathlib.Path(encore.__file__).parent
    stub = ast.parse((package / "_C.pyi").read_text())
    classes = {n.name: n for n in stub.body if isinstance(n, ast.ClassDef)}
    for name in LAYERS:
        cls = getattr(nn, name)
        assert issubclass(cls, nn.Module)
        signature = cls.__doc__.splitlines()[0]
        assert signature.startswith(name + "(")
        init = next(n for n in classes[name].body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
        stub_params = [a.arg for a in init.args.args[1:]]
        assert stub_params == [p.split(":")[0].strip() for p in _params(signature)]
    # The defaults a user reads are the ones C++ uses.
    assert "padding: str = 'valid'" in nn.Conv1D.__doc__ and "strides: int = 1" in nn.Conv1D.__doc__


def _params(signature):
    inner = signature[signature.index("(") + 1 : signature.rindex(")")]
    return [p for p in inner.split(", ") if p]


def test_arguments_are_bound_as_the_row_says():
    dense = nn.Dense(3, "relu", use_bias=False)
    assert [n for n, _ in dense.named_parameters()] == []  # unbuilt
    dense(encore.ones(2, 4))
    assert [n for n, _ in dense.named_parameters()] == ["kernel"]
    with pytest.raises(TypeError, match=r"^\[Dense\] argument 'units' must be an int, got str$"):
        nn.Dense("ten")
    with pytest.raises(TypeError, match=r"^\[Conv1D\] missing required argument 'kernel_size'$"):
        nn.Conv1D(4)
    with pytest.raises(TypeError, match=r"^\[Dense\] got an unexpected keyword argument 'unit'$"):
        nn.Dense(unit=3)
    with pytest.raises(ValueError, match=r"^\[lstm\] implementation must be one of 'auto', 'composed', 'cudnn'"):
        nn.LSTM(3, implementation="fast")
    with pytest.raises(TypeError, match=r"^\[Bidirectional\] argument 'layer' must be an encore.nn.Recurrent"):
        nn.Bidirectional(nn.Dense(3))
    assert nn.MaxPooling1D(3, 1)(encore.ones(1, 5, 2)).shape == (1, 3, 2)
    assert inspect.isclass(nn.Activation)
