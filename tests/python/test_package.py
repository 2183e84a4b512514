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


def test_stubs_describe_the_extension():
    package = pathlib.Path(encore.__file__).parent
    assert (package / "py.typed").exists()
    stub = ast.parse((package / "_C.pyi").read_text())
    names = [node.name for node in stub.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    missing = [n for n in names if not hasattr(encore._C, n)]
    assert not missing, missing
    documented = set(names) | {n.target.id for n in stub.body if isinstance(n, ast.AnnAssign)}
    undocumented = [n for n in dir(encore._C) if not n.startswith("__") and n not in documented and n != "cuda_built"]
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
    encore.show_config()
    shown = capsys.readouterr().out
    assert shown.startswith(f"encore {encore.__version__} (")
    for expected in ("\n  oneDNN ", "\n  BLAS: OpenBLAS ", "\n  OpenMP max threads: ", "\n  OpenBLAS threads: ",
                     "\n  oneDNN threads: ", "\nbackends:\n  cpu: yes\n", "\npython:\n  Python ", "\n  NumPy "):
        assert expected in shown, expected
    assert ("\n  cuda: not available (" in shown) != encore.cuda.is_built()
    info = subprocess.run([sys.executable, "-m", "encore.info"], capture_output=True, text=True, check=True)
    assert info.stdout == shown
    assert info.stderr == ""  # e.g. no runpy warning about encore.info being imported twice
