#!/usr/bin/env python3
"""Checks the portable wheel (scripts/wheel.sh) as a user without oneDNN or OpenBLAS gets it.

    .venv/bin/python tests/wheel/check_wheel.py      (scripts/test.sh runs it)

1. Builds the wheel into a temporary folder; the build writes nothing into the source tree
   (so a read-only checkout builds too).
2. The wheel is tagged manylinux (auditwheel agrees), has the version of CMakeLists.txt, and
   carries oneDNN and OpenBLAS under encore.libs/.
3. Installs it into a fresh virtual environment and, with LD_LIBRARY_PATH unset, trains a few
   traced steps of a Conv1D + Dense model (oneDNN and OpenBLAS kernels). The system's copies
   cannot be hidden from the loader here (no mount namespace), so the check is what was
   loaded: libdnnl, libopenblas, libgomp, ... came from the wheel and no system copy of them
   was mapped; and ldd resolves every dependency of the installed libraries either into the
   wheel or to what manylinux lets a wheel take from the system (libc, libstdc++, libz, ...).
   auditwheel renames the vendored libraries (libdnnl-<hash>.so.2), so the system's copies
   could not stand in for them anyway.
4. `python -m encore.info` runs there and reports the wheel's version and libraries.
"""

import json
import pathlib
import re
import subprocess
import sys
import tempfile
import time
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
# What a manylinux wheel may take from the system (auditwheel's policy), and the vDSO.
MANYLINUX = re.compile(r"(^|/)(ld-linux-x86-64|linux-vdso|lib(c|m|dl|rt|pthread|gcc_s|stdc\+\+|z))\.so[.0-9]*$")
# The libraries that the wheel vendors: oneDNN, OpenBLAS and theirs.
VENDORED = re.compile(r"(^|/)lib(dnnl|openblas|gomp|gfortran|quadmath|OpenCL)[^/]*$")

TRAIN = r"""
import json, sys
import numpy as np
import encore, encore.nn as nn, encore.optim as optim

rng = np.random.default_rng(0)
encore.manual_seed(0)
model = nn.Sequential([nn.Conv1D(16, 5, padding="same"), nn.GlobalAveragePooling1D(),
                       nn.Dense(8, activation="relu"), nn.Dense(1, activation="sigmoid")])
model.build((32, 20, 3))
adam = optim.Adam(model.parameters(), lr=1e-2)

@encore.trace
def step(x, y):
    adam.zero_grad()
    loss = nn.binary_crossentropy(y, model(x))
    loss.backward()
    adam.step()
    return loss

x = rng.standard_normal((32, 20, 3)).astype(np.float32)
y = (x.mean(axis=(1, 2)) > 0).astype(np.float32).reshape(32, 1)
losses = [step(x, y).item() for _ in range(20)]
mapped = sorted({line.split()[-1] for line in open("/proc/self/maps") if ".so" in line.split()[-1]})
print(json.dumps({"version": encore.__version__, "file": encore.__file__, "losses": losses,
                  "libraries": mapped}))
"""


def run(cmd, **kwargs):
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"FAILED ({result.returncode}): {' '.join(map(str, cmd))}\n{result.stdout}\n{result.stderr}")
    return result.stdout


def source_tree_entries():
    """Untracked and ignored entries of the source tree (folders as one entry)."""
    return set(run(["git", "-C", ROOT, "status", "--porcelain", "--ignored", "--untracked-files=normal"]).splitlines())


def fail(message):
    sys.exit(f"check_wheel: {message}")


def main():
    version = re.search(r"project\(encore VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text()).group(1)
    with tempfile.TemporaryDirectory(prefix="encore-wheel-") as tmp:
        tmp = pathlib.Path(tmp)
        before = source_tree_entries()
        start = time.monotonic()
        wheel = pathlib.Path(run([ROOT / "scripts/wheel.sh", "--this-python", tmp / "dist"]).splitlines()[-1])
        build_s = time.monotonic() - start
        written = source_tree_entries() - before
        if written:
            fail(f"building the wheel wrote into the source tree: {sorted(written)}")

        # 2. Tag, version, vendored libraries.
        tag = re.fullmatch(rf"encore-{re.escape(version)}-(cp\d+)-\1-(manylinux_2_\d+_x86_64)\.whl", wheel.name)
        if not tag:
            fail(f"{wheel.name} is not a manylinux wheel of encore {version}")
        shown = " ".join(run([sys.executable, "-m", "auditwheel", "show", wheel]).split())
        if f'consistent with the following platform tag: "{tag.group(2)}"' not in shown:
            fail(f"auditwheel show disagrees with the tag {tag.group(2)}:\n{shown}")
        names = zipfile.ZipFile(wheel).namelist()
        for lib in ("libdnnl", "libopenblas", "libgomp"):
            if not any(n.startswith(f"encore.libs/{lib}") for n in names):
                fail(f"the wheel does not carry {lib}: {names}")

        # 3. A fresh environment, trained in with nothing from LD_LIBRARY_PATH.
        venv = tmp / "venv"
        run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", venv])
        start = time.monotonic()
        run([venv / "bin/python", "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel])
        install_s = time.monotonic() - start
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp)}  # no LD_LIBRARY_PATH, no PYTHONPATH
        report = json.loads(run([venv / "bin/python", "-c", TRAIN], env=env, cwd=tmp).splitlines()[-1])
        site = venv.resolve()
        if report["version"] != version or not pathlib.Path(report["file"]).resolve().is_relative_to(site):
            fail(f"imported encore {report['version']} from {report['file']}, not the wheel's")
        losses = report["losses"]
        if not losses[-1] < 0.9 * losses[0]:
            fail(f"the loss did not fall: {losses}")
        # numpy carries its own copies (numpy.libs/), which are in the environment too.
        system_copies = [p for p in report["libraries"] if VENDORED.search(p) and not pathlib.Path(p).is_relative_to(site)]
        if system_copies:
            fail(f"loaded the system's copies of the wheel's libraries: {system_copies}")
        for lib in ("libdnnl", "libopenblas"):
            if not any(f"/encore.libs/{lib}" in p for p in report["libraries"]):
                fail(f"{lib} was not loaded from the wheel: {report['libraries']}")

        package = next(site.glob("lib/python*/site-packages"))
        for so in [*package.glob("encore/*.so"), *package.glob("encore.libs/*.so*")]:
            for line in run(["ldd", so], env=env).splitlines():
                resolved = re.search(r"=>\s+(\S+)", line)
                path = resolved.group(1) if resolved else line.split()[0]
                if path == "not":
                    fail(f"ldd {so.name}: {line.strip()}")
                if not pathlib.Path(path).resolve().is_relative_to(site) and not MANYLINUX.search(path):
                    fail(f"ldd {so.name}: {line.strip()} comes from the system, not the wheel")

        # 4. The bug-report information.
        info = run([venv / "bin/python", "-m", "encore.info"], env=env, cwd=tmp)
        for expected in (f"encore {version} ", "oneDNN ", "BLAS: OpenBLAS ", "cuda: not available (this build has no CUDA backend",
                         "OpenMP max threads: "):
            if expected not in info:
                fail(f"python -m encore.info lacks '{expected}':\n{info}")

        installed_kib = sum(f.stat().st_size for f in package.glob("encore*/**/*") if f.is_file()) // 1024
        print(f"wheel {wheel.name}: {wheel.stat().st_size // 1024} KiB, built in {build_s:.0f} s; "
              f"installed into a fresh venv in {install_s:.0f} s ({installed_kib} KiB); trained from it "
              f"(loss {losses[0]:.3f} -> {losses[-1]:.3f}) with oneDNN and OpenBLAS from the wheel")


if __name__ == "__main__":
    main()
