"""encore.show_config(): what this encore is, to paste into a bug report."""

import platform
import sys
from pathlib import Path

import numpy

from . import _C


def show_config() -> None:
    """Prints encore's version and build, the versions of the libraries it runs on (oneDNN,
    OpenBLAS, zlib; the CUDA runtime and driver, cuBLAS and cuDNN with the CUDA backend), the
    OpenMP, OpenBLAS and oneDNN thread counts, the backends and their devices, and the Python
    side: Python, NumPy, where encore is installed. ``python -m encore.info`` prints the same."""
    print(_C.show_config(), end="")
    print("python:")
    print(f"  Python {platform.python_version()} ({sys.executable})")
    print(f"  NumPy {numpy.__version__}")
    print(f"  encore package: {Path(__file__).parent}")
    print(f"  platform: {platform.platform()}")
