"""The package surface: exports, stubs and typing marker."""

import ast
import pathlib

import encore


def test_exports():
    for name in ("tensor", "zeros", "trace", "no_grad", "nn", "optim", "cuda", "ledger", "autotune", "float32",
                 "int64", "Device", "Tensor", "RetraceWarning", "from_dlpack", "from_numpy", "bucket"):
        assert hasattr(encore, name), name
    assert "sum" not in encore.__all__ and "tensor" in encore.__all__
    assert encore.__version__
    assert encore.nn.Dense is encore._C.Dense and encore.optim.Adam is encore._C.Adam


def test_stubs_describe_the_extension():
    package = pathlib.Path(encore.__file__).parent
    assert (package / "py.typed").exists()
    stub = ast.parse((package / "_C.pyi").read_text())
    names = [node.name for node in stub.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    missing = [n for n in names if not hasattr(encore._C, n)]
    assert not missing, missing
    documented = set(names)
    undocumented = [n for n in dir(encore._C) if not n.startswith("__") and n not in documented and n != "cuda_built"]
    assert not undocumented, undocumented
