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

from . import _C
from ._C import (
    BackendError,
    Device,
    DeviceError,
    DType,
    DTypeError,
    Error,
    Generator,
    InvalidValueError,
    OutOfMemoryError,
    ShapeError,
    ShapePolicy,
    Tensor,
    UnsupportedError,
    abs,
    activation,
    add,
    allow_tf32,
    arange,
    as_tensor,
    bucket,
    clip,
    concat,
    conv1d,
    default_generator,
    div,
    dropout,
    empty,
    eq,
    exact,
    exp,
    flip,
    flush_denormal,
    from_dlpack,
    from_numpy,
    full,
    full_like,
    gather_last,
    ge,
    gt,
    is_grad_enabled,
    is_training,
    le,
    leaky_relu,
    log,
    log_softmax,
    lstm_cell,
    lt,
    manual_seed,
    matmul,
    max,
    maximum,
    mean,
    minimum,
    mul,
    ne,
    neg,
    normal,
    ones,
    ones_like,
    permute,
    pow,
    rand,
    randn,
    relu,
    reshape,
    scatter_last,
    set_allow_tf32,
    set_flush_denormal,
    set_training,
    sigmoid,
    softmax,
    softplus,
    sqrt,
    stack,
    sub,
    sum,
    sum_to,
    tanh,
    tensor,
    transpose,
    uniform,
    zeros,
    zeros_like,
)
from ._modes import enable_grad, no_grad, set_grad_enabled, training
from ._trace import RetraceWarning, trace
from . import autotune, callbacks, cuda, data, ledger, nn, optim  # noqa: E402  (submodules use the names above)
from . import _tensor  # noqa: F401  (adds the Python-level Tensor methods)
from . import _training  # noqa: F401  (adds compile / fit / evaluate / predict to nn.Module)

float32 = DType.float32
float64 = DType.float64
int32 = DType.int32
int64 = DType.int64

__version__ = "0.1.0"

# `from encore import *` leaves Python's abs/max/pow/sum alone (encore.sum etc. stay available).
__all__ = [
    "BackendError", "DType", "DTypeError", "Device", "DeviceError", "Error", "Generator", "callbacks", "data",
    "InvalidValueError", "OutOfMemoryError", "RetraceWarning", "ShapeError", "ShapePolicy", "Tensor",
    "UnsupportedError",
    "activation", "add", "allow_tf32", "arange", "as_tensor", "autotune", "bucket", "clip",
    "concat", "conv1d", "cuda", "default_generator", "div", "dropout", "empty", "enable_grad", "eq",
    "exact", "exp", "flip", "float32", "float64", "flush_denormal", "from_dlpack", "from_numpy",
    "full", "full_like", "gather_last", "ge", "gt", "int32", "int64", "is_grad_enabled",
    "is_training", "le", "leaky_relu", "ledger", "log", "log_softmax", "lstm_cell", "lt",
    "manual_seed", "matmul", "maximum", "mean", "minimum", "mul", "ne", "neg", "nn", "no_grad",
    "normal", "ones", "ones_like", "optim", "permute", "rand", "randn", "relu", "reshape",
    "scatter_last", "set_allow_tf32", "set_flush_denormal", "set_grad_enabled", "set_training",
    "sigmoid", "softmax", "softplus", "sqrt", "stack", "sub", "sum_to", "tanh", "tensor", "trace",
    "training", "transpose", "uniform", "zeros", "zeros_like",
]
