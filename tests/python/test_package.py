"""The package surface: exports, stubs and typing marker."""

import ast
import importlib.metadata
import pathlib
import re
import subprocess
import sys

import pytest

import encore


def test_exports():
    for name in ("tensor", "zeros", "trace", "no_grad", "nn", "optim", "cuda", "ledger", "autotune", "float32",
                 "int64", "Device", "Tensor", "RetraceWarning", "from_dlpack", "from_numpy", "bucket", "compare_modes"):
        assert hasattr(encore, name), name
    assert "sum" not in encore.__all__ and "tensor" in encore.__all__
    assert encore.__version__
    assert encore.nn.Dense is encore._C.Dense and encore.optim.Adam is encore._C.Adam


def test_all_is_literal_and_complete():
    """__all__ is two literal lists (what type checkers read): every public name of the package
    and every op function, less the ops named like Python builtins."""
    import builtins

    source = pathlib.Path(encore.__file__).read_text()
    tree = ast.parse(source)
    literal = []
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == "__all__":
            assert isinstance(node, (ast.Assign, ast.AugAssign)) and isinstance(node.value, ast.List), \
                "__all__ must be built from literal lists"
            literal += [ast.literal_eval(e) for e in node.value.elts]
    assert literal == encore.__all__
    ops = set(encore._C._op_functions)
    expected_ops = {n for n in ops if not hasattr(builtins, n)}
    listed_ops = set(encore.__all__) & ops
    assert listed_ops == expected_ops, (
        f"add to __all__ in encore/__init__.py: {sorted(expected_ops - listed_ops)}; "
        f"remove: {sorted(listed_ops - expected_ops)}")
    assert not [n for n in encore.__all__ if hasattr(builtins, n)]
    assert len(set(encore.__all__)) == len(encore.__all__)
    public = {n for n, v in vars(encore).items() if not n.startswith("_") and n not in ("os",)}
    missing = public - set(encore.__all__) - {n for n in ops if hasattr(builtins, n)}
    assert not missing, f"public names missing from __all__: {sorted(missing)}"
    namespace = {}
    exec("from encore import *", namespace)
    assert namespace["sum"] is builtins.sum if "sum" in namespace else True
    assert "sum" not in namespace and namespace["exp"] is encore.exp


def test_nn_all_is_literal_and_lists_every_layer():
    source = pathlib.Path(encore.nn.__file__).read_text()
    node = next(n for n in ast.parse(source).body
                if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "__all__")
    assert isinstance(node.value, ast.List) and [ast.literal_eval(e) for e in node.value.elts] == encore.nn.__all__
    missing = set(encore.nn._LAYERS) - set(encore.nn.__all__)
    assert not missing, f"add to __all__ in encore/nn.py: {sorted(missing)}"
    assert all(hasattr(encore.nn, n) for n in encore.nn.__all__)


def test_stubs_describe_the_extension():
    package = pathlib.Path(encore.__file__).parent
    assert (package / "py.typed").exists()
    stub = ast.parse((package / "_C.pyi").read_text())
    names = [node.name for node in stub.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    missing = [n for n in names if not hasattr(encore._C, n)]
    assert not missing, missing
    documented = set(names) | {n.target.id for n in stub.body if isinstance(n, ast.AnnAssign)}
    undocumented = [n for n in dir(encore._C) if not n.startswith("__") and n not in documented]
    assert not undocumented, undocumented


def test_one_version_for_the_cpp_and_python_packages():
    cmake = (pathlib.Path(__file__).resolve().parents[2] / "CMakeLists.txt").read_text()
    project_version = re.search(r"project\(encore VERSION ([0-9.]+)", cmake).group(1)
    assert encore.__version__ == encore._C.version() == project_version
    try:
        metadata_version = importlib.metadata.version("encore")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("encore runs from a build tree (PYTHONPATH), which has no package metadata")
    assert metadata_version == project_version


def test_show_config_and_python_m_encore_info(capsys):
    # The caches' lines count what earlier tests of this process left; the subprocess has none.
    encore.release_cached_memory()
    encore.show_config()
    shown = capsys.readouterr().out
    assert shown.startswith(f"encore {encore.__version__} (")
    for expected in ("\n  oneDNN ", "\n  BLAS: OpenBLAS ", "\n  OpenMP max threads: ", "\n  OpenBLAS threads: ",
                     "\n  oneDNN threads: ", "\nbackends:\n  cpu: yes\n", "\npython:\n  Python ", "\n  NumPy "):
        assert expected in shown, expected
    assert ("\n  cuda: not available (" in shown) != encore.cuda.is_built()
    info = subprocess.run([sys.executable, "-m", "encore.info"], capture_output=True, text=True, check=True)

    # The FMA peak takes a clock measured in each process: the same line but for its numbers.
    def same_peak(text):
        return re.sub(r"FMA peak \d+ GFLOP/s per core \((.*) at [0-9.]+ GHz: measured [0-9.]+,",
                      r"FMA peak N GFLOP/s per core (\1 at X GHz: measured X,", text)
    assert "GHz: measured " in shown
    assert same_peak(info.stdout) == same_peak(shown)
    assert info.stderr == ""  # e.g. no runpy warning about encore.info being imported twice
