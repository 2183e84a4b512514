#!/usr/bin/env python3
"""Checks encore as another CMake project uses it (registered in CTest by tests/CMakeLists.txt).

    check_install.py package --build-dir B [--prefix-path=P] [--cmake-arg=-D...]...
        `cmake --install B` into a temporary prefix (whose headers must include nothing but
        each other and the standard library), then builds the README's C++ program and
        CMakeLists.txt ("Using it from C++", taken verbatim from README.md) against it with
        find_package(encore CONFIG REQUIRED), runs it (three training steps, a trace) and
        checks that it ran on the installed library.
    check_install.py prerequisites [--prefix-path=P] [--cmake-arg=-D...]...
        configures encore with oneDNN and zlib made unfindable and checks that the error
        names both with their Debian packages, and nothing that is present.
"""

import argparse
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run(cmd, **kwargs):
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"FAILED ({result.returncode}): {' '.join(map(str, cmd))}\n{result.stdout}\n{result.stderr}")
    return result.stdout


def readme_snippets():
    """The ```cpp and ```cmake blocks of the README's "Using it from C++" section."""
    text = (ROOT / "README.md").read_text()
    section = re.search(r"^## Using it from C\+\+\n(.*?)(?=^## )", text, re.S | re.M)
    if not section:
        sys.exit("README.md has no '## Using it from C++' section")
    blocks = {}
    for lang in ("cpp", "cmake"):
        found = re.findall(rf"^```{lang}\n(.*?)^```", section.group(1), re.S | re.M)
        if len(found) != 1:
            sys.exit(f"README.md's C++ section has {len(found)} ```{lang} blocks, expected 1")
        blocks[lang] = found[0]
    return blocks


def check_package(args):
    snippets = readme_snippets()
    with tempfile.TemporaryDirectory(prefix="encore-install-") as tmp:
        tmp = pathlib.Path(tmp)
        prefix, project = tmp / "prefix", tmp / "train"
        run(["cmake", "--install", args.build_dir, "--prefix", prefix])
        for name in ("encoreConfig.cmake", "encoreConfigVersion.cmake", "encoreTargets.cmake"):
            if not (prefix / "lib/cmake/encore" / name).is_file():
                sys.exit(f"the install has no lib/cmake/encore/{name}")

        # encore::encore carries no include path but its own: installed headers include only
        # each other and the standard library.
        for header in (prefix / "include/encore").rglob("*.h"):
            for included in re.findall(r"^\s*#\s*include\s*<([^>]+)>", header.read_text(), re.M):
                if "." in included or "/" in included:
                    sys.exit(f"installed header {header.relative_to(prefix)} includes <{included}>")

        project.mkdir()
        (project / "train.cpp").write_text(snippets["cpp"])
        (project / "CMakeLists.txt").write_text(snippets["cmake"])
        prefix_path = ";".join(filter(None, [str(prefix), args.prefix_path]))
        run(["cmake", "-S", project, "-B", project / "build", f"-DCMAKE_PREFIX_PATH={prefix_path}",
             *args.cmake_arg])
        run(["cmake", "--build", project / "build"])
        program = project / "build/train"

        linked = run(["ldd", program])
        if f"{prefix}/lib/libencore.so" not in linked:
            sys.exit(f"train does not load the installed libencore.so:\n{linked}")
        out = run([program])
        losses = re.findall(r"^loss (\S+)$", out, re.M)
        if len(losses) != 3 or not all(0 < float(v) < 10 for v in losses):
            sys.exit(f"expected three finite losses:\n{out}")
        for expected in ("traced function 'train_step': 3 calls, 2 replays", "graph(x: (32, 140, 30)"):
            if expected not in out:
                sys.exit(f"expected '{expected}' in the output:\n{out}")
    print(f"README program built against the installed encore and trained: losses {', '.join(losses)}")


def check_prerequisites(args):
    with tempfile.TemporaryDirectory(prefix="encore-prereq-") as tmp:
        result = subprocess.run(
            ["cmake", "-S", ROOT, "-B", tmp, "-DENCORE_CUDA=OFF", "-DENCORE_TESTS=OFF",
             "-DENCORE_EXAMPLES=OFF", "-DCMAKE_DISABLE_FIND_PACKAGE_dnnl=ON",
             "-DCMAKE_DISABLE_FIND_PACKAGE_ZLIB=ON", f"-DCMAKE_PREFIX_PATH={args.prefix_path}", *args.cmake_arg],
            capture_output=True, text=True)
    out = result.stdout + result.stderr
    if result.returncode == 0:
        sys.exit(f"configuring without oneDNN and zlib succeeded:\n{out}")
    message = " ".join(out.split())  # CMake wraps long error lines
    for expected in ("oneDNN (Debian/Ubuntu package libdnnl-dev)", "zlib (Debian/Ubuntu package zlib1g-dev)",
                     "sudo apt-get install libdnnl-dev zlib1g-dev"):
        if expected not in message:
            sys.exit(f"expected '{expected}' in the configure error:\n{out}")
    for present in ("libopenblas-dev", "nlohmann-json3-dev"):
        if present in message:
            sys.exit(f"the error names {present}, which is installed:\n{out}")
    print("a configure without oneDNN and zlib names both and their Debian packages")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("check", choices=["package", "prerequisites"])
    parser.add_argument("--build-dir", help="the encore build tree to install (package)")
    parser.add_argument("--prefix-path", default="", help="where encore's dependencies are (the build's CMAKE_PREFIX_PATH)")
    parser.add_argument("--cmake-arg", action="append", default=[], help="passed to the configure step")
    args = parser.parse_args()
    if args.check == "package":
        check_package(args)
    else:
        check_prerequisites(args)


if __name__ == "__main__":
    main()
