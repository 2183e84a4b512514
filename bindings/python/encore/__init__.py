"""encore: a small deep learning runtime with eager and traced (graph replay) execution.

The C++ runtime lives in the private extension ``encore._C``; this package re-exports it
and adds the Pythonic layer: context managers, the ``trace`` decorator, ``nn``, ``optim``,
``cuda``, ``ledger`` and ``autotune``.

Memory sharing with NumPy:

* ``encore.from_numpy(a)``, ``encore.as_tensor(a)``, ``encore.Tensor(a)`` and NumPy arrays
  passed to any encore function share ``a``'s memory when it is C-contiguous, aligned,
  writeable, in native byte order and float32/float64/int32/int64. The tensor keeps the
  array alive. Other arrays are copied.
* ``Tensor.numpy()`` of a contiguous CPU tensor returns an array that views the tensor's
  memory and keeps it alive; a strided or GPU tensor is copied first. ``encore.tensor(x)``
  always copies.
* ``encore.from_dlpack(obj)`` and ``Tensor.__dlpack__`` exchange memory zero-copy with any
  DLPack producer/consumer (NumPy >= 1.22, PyTorch, CuPy, JAX).
"""

import os

# oneDNN and BLAS share one OpenMP pool. Its workers spin after each kernel by default, which
# on a busy machine steals the cores the next kernel needs (steps several times slower): the
# OpenMP runtime reads this once, when it loads with _C. Set OMP_WAIT_POLICY=ACTIVE to undo.
if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

from . import _C  # noqa: E402
from ._C import (
    BackendError,
    Device,
    DeviceError,
    DistributedError,
    DType,
    DTypeError,
    Error,
    FileError,
    Generator,
    InvalidValueError,
    OutOfMemoryError,
    ShapeError,
    ShapePolicy,
    Tensor,
    UnsupportedError,
    allow_tf32,
    as_tensor,
    bucket,
    cpu_info,
    default_generator,
    exact,
    flush_denormal,
    from_dlpack,
    from_numpy,
    is_grad_enabled,
    is_training,
    manual_seed,
    num_threads,
    prepared_limit,
    release_cached_memory,
    set_allow_tf32,
    set_flush_denormal,
    set_num_threads,
    set_prepared_limit,
    set_training,
    tensor,
)
from ._ops import *  # noqa: F401,F403  (every op function: encore.exp, encore.conv1d, ...)
from ._config import show_config
from ._modes import enable_grad, no_grad, set_grad_enabled, training
from ._trace import RetraceWarning, trace
from . import autotune, callbacks, cuda, data, distributed, ledger, metrics, nn, optim  # noqa: E402  (submodules use the names above)
from . import _tensor  # noqa: F401  (adds the Python-level Tensor methods)
from . import _training  # noqa: F401  (adds compile / fit / evaluate / predict to nn.Module)
from ._compare import compare_modes

float32 = DType.float32
float64 = DType.float64
int32 = DType.int32
int64 = DType.int64

# The C++ library's version; the package metadata has the same (both come from CMakeLists.txt).
__version__ = _C.version()

# Literal lists, the form type checkers read (mypy --strict sees a name as exported only when
# __all__ lists it literally): the package's own names, then every op function of _ops.py but
# those named like Python builtins (abs, max, pow, sum), so that `from encore import *` leaves the
# builtins alone (encore.sum etc. stay attributes). tests/python/test_package.py checks both lists
# against the package and the op rows: a new op fails it until it is added here.
__all__ = [
    "allow_tf32", "as_tensor", "autotune", "BackendError", "bucket", "callbacks", "compare_modes", "cpu_info",
    "cuda", "data", "default_generator", "Device", "DeviceError", "distributed", "DistributedError", "DType",
    "DTypeError", "enable_grad", "Error", "exact", "FileError", "float32", "float64", "flush_denormal",
    "from_dlpack", "from_numpy", "Generator", "int32", "int64", "InvalidValueError", "is_grad_enabled",
    "is_training", "ledger", "manual_seed", "metrics", "nn", "no_grad", "num_threads", "optim", "OutOfMemoryError",
    "prepared_limit", "release_cached_memory", "RetraceWarning", "set_allow_tf32", "set_flush_denormal",
    "set_grad_enabled", "set_num_threads", "set_prepared_limit", "set_training", "ShapeError", "ShapePolicy",
    "show_config", "Tensor", "tensor", "trace", "training", "UnsupportedError",
]
__all__ += [
    "activation", "add", "all_gather", "all_reduce", "arange", "avg_pool1d", "batch_norm", "broadcast", "clip",
    "concat", "conv1d", "conv1d_fused", "dense", "div", "dropout", "embedding", "empty", "eq", "erf", "exp", "flip",
    "from_blocked", "full", "full_like", "gather_last", "ge", "gelu", "gru_cell", "gru_sequence", "gt",
    "layer_norm", "le", "leaky_relu", "log", "log_softmax", "lstm_cell", "lstm_sequence", "lt", "mask_sequence",
    "matmul", "max_pool1d", "maximum", "mean", "minimum", "moments", "mul", "ne", "neg", "normal", "ones",
    "ones_like", "pad", "permute", "rand", "randn", "relu", "reshape", "reverse_sequence", "scatter_last",
    "sigmoid", "softmax", "softplus", "split", "sqrt", "stack", "sub", "sum_to", "tanh", "to_blocked", "transpose",
    "unbind", "unfold", "uniform", "zeros", "zeros_like",
]
