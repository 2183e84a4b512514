"""Keras-style layers on batch-major, channels-last tensors ``(batch, steps, channels)``,
Sequential, checkpoint files (safetensors) and losses."""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING, Union

from . import _C
from ._C import (
    Module,
    binary_accuracy,
    binary_crossentropy,
    categorical_crossentropy,
    mean_squared_error,
    sparse_categorical_crossentropy,
)

if TYPE_CHECKING:
    from ._C import *  # noqa: F401,F403  (type checkers see the layer classes of _C.pyi)

# Every layer class of the extension (a subclass of Module) is an encore.nn layer: a new layer
# needs no line here.
_LAYERS = sorted(name for name, value in vars(_C).items() if isinstance(value, type) and issubclass(value, Module))
globals().update({name: getattr(_C, name) for name in _LAYERS})

__all__ = _LAYERS + [
    "save", "load", "binary_crossentropy", "categorical_crossentropy", "mean_squared_error",
    "sparse_categorical_crossentropy", "binary_accuracy",
]


def save(model: Module, path: Union[str, "os.PathLike[str]"]) -> None:
    """Writes every parameter and buffer (``named_weights()``) of ``model`` to ``path`` as a safetensors file that other tools
    read (``safetensors.numpy.load_file``). The write is atomic: a temporary file
    ``<path>.<pid>-<n>.tmp`` in the same folder is synced and renamed over ``path``, so an
    interrupted save leaves the previous file. Raises ValueError when the file cannot be written
    (missing folder, no permission, disk full)."""
    _C.save_module(model, os.fspath(path))


def load(model: Module, path: Union[str, "os.PathLike[str]"]) -> Module:
    """Loads the safetensors file ``path`` into ``model``'s parameters and buffers in place and returns the
    model. All or nothing: the file must hold every parameter exactly once with its shape and
    dtype, and nothing else; files encore wrote are checked against their checksums; on any
    error (ValueError, or encore.ShapeError for a shape mismatch) the model is unchanged.
    Raises FileNotFoundError when ``path`` does not exist. Files in encore's former format of
    its own are no longer read."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    _C.load_module(model, path)
    return model
