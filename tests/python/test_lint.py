"""The checks that bite in every build (issue 25): the C++ tree formatted as .clang-format says,
ruff on the Python sources, mypy --strict on the installed package, and the size rules of
docs/ARCHITECTURE.md ("Keeping it small") -- no library function over 80 lines, no library file
over 600 without a reason at its top. Each runs a tool that python_env.sh installs (clang-format
pinned, since each release formats a little differently)."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent
LIBRARY = ("core", "ops", "autograd", "graph", "nn", "train", "bindings")
MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 600
# pybind11 registration: one statement per bound name, a table in code form.
TABLE_FUNCTIONS = re.compile(r"^encore::python::init_\w+$")


def tracked(*patterns):
    """The files git tracks that match `patterns` (a source checkout; skips elsewhere)."""
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout: the lint checks run on the source tree")
    out = subprocess.run(["git", "ls-files", "--", *patterns], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    return [ROOT / line for line in out.splitlines() if (ROOT / line).is_file()]


def tool(name):
    path = BIN / name
    if not path.exists():
        pytest.skip(f"{name} is not in the venv (scripts/python_env.sh installs it)")
    return str(path)


def cpp_files():
    return tracked("*.cpp", "*.h", "*.cu", "*.cuh")


def test_cpp_is_formatted():
    files = cpp_files()
    assert len(files) > 100
    result = subprocess.run([tool("clang-format"), "--dry-run", "-Werror", *map(str, files)], cwd=ROOT,
                            capture_output=True, text=True)
    where = sorted({line.split(":")[0] for line in result.stderr.splitlines() if ": error:" in line})
    assert result.returncode == 0, (f"{len(where)} files differ from .clang-format (run clang-format -i on them): "
                                    f"{where[:20]}\n{result.stderr[:3000]}")


def test_clang_format_flags_a_misformatted_file(tmp_path):
    """The check above would see a violation: the pinned clang-format with the project's style."""
    bad = tmp_path / "bad.cpp"
    bad.write_text("int   f( int x ){return x;}\n")
    shutil.copy(ROOT / ".clang-format", tmp_path / ".clang-format")
    result = subprocess.run([tool("clang-format"), "--dry-run", "-Werror", str(bad)], capture_output=True, text=True)
    assert result.returncode != 0 and "bad.cpp" in result.stderr


def test_ruff():
    paths = ["bindings/python/encore", "tests/python", "examples", "scripts"]
    result = subprocess.run([tool("ruff"), "check", "--no-cache", *paths], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_mypy_strict_on_the_package(tmp_path):
    """The installed package (with its generated _C.pyi and _ops.py) as a user's type checker sees it.
    Run from an empty folder, so the source tree does not shadow the installed package."""
    mypy = tool("mypy")
    env = dict(os.environ, MYPY_CACHE_DIR=str(tmp_path / "cache"))
    result = subprocess.run([mypy, "--strict", "--no-error-summary", "-p", "encore"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def library_sources():
    return [f for f in tracked(*(f"{d}/*" for d in LIBRARY)) if f.suffix in (".cpp", ".h", ".cu", ".cuh")]


def test_no_library_function_over_80_lines():
    import lizard  # installed by python_env.sh

    long = []
    for path in library_sources():
        for fn in lizard.analyze_file(str(path)).function_list:
            if fn.length > MAX_FUNCTION_LINES and not TABLE_FUNCTIONS.match(fn.name):
                long.append(f"{path.relative_to(ROOT)}:{fn.start_line} {fn.name} ({fn.length} lines)")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (split them into named steps): {long}"


def test_size_check_sees_a_long_function(tmp_path):
    import lizard

    body = "\n".join(f"  x += {i};" for i in range(MAX_FUNCTION_LINES))
    source = tmp_path / "long.cpp"
    source.write_text(f"int f(int x) {{\n{body}\n  return x;\n}}\n")
    (fn,) = lizard.analyze_file(str(source)).function_list
    assert fn.length > MAX_FUNCTION_LINES


def test_no_long_library_file_without_a_reason():
    """A library file over 600 lines says why at its top, in a comment line starting `// Long:`."""
    long = []
    for path in library_sources():
        lines = path.read_text(errors="replace").splitlines()
        if len(lines) > MAX_FILE_LINES and not any(line.startswith("// Long:") for line in lines[:20]):
            long.append(f"{path.relative_to(ROOT)} ({len(lines)} lines)")
    assert not long, f"files over {MAX_FILE_LINES} lines with no '// Long:' reason at the top: {long}"
