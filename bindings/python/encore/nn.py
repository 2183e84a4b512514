"""Keras-style layers on batch-major, channels-last tensors ``(batch, steps, channels)``,
Sequential, checkpoint files (safetensors) and losses."""

from __future__ import annotations

import errno
import os
from typing import Union

from . import _C
from ._C import (
    LSTM,
    Bidirectional,
    Conv1D,
    Dense,
    Dropout,
    Flatten,
    GlobalAveragePooling1D,
    GlobalMaxPooling1D,
    Module,
    Sequential,
    binary_accuracy,
    binary_crossentropy,
    mean_squared_error,
    sparse_categorical_crossentropy,
)

__all__ = [
    "Module", "Dense", "Conv1D", "LSTM", "Bidirectional", "Dropout", "GlobalAveragePooling1D",
    "GlobalMaxPooling1D", "Flatten", "Sequential", "save", "load", "binary_crossentropy",
    "mean_squared_error", "sparse_categorical_crossentropy", "binary_accuracy",
]


def save(model: Module, path: Union[str, "os.PathLike[str]"]) -> None:
    """Writes every parameter of ``model`` to ``path`` as a safetensors file that other tools
    read (``safetensors.numpy.load_file``). The write is atomic: a temporary file
    ``<path>.<pid>-<n>.tmp`` in the same folder is synced and renamed over ``path``, so an
    interrupted save leaves the previous file. Raises ValueError when the file cannot be written
    (missing folder, no permission, disk full)."""
    _C.save_module(model, os.fspath(path))


def load(model: Module, path: Union[str, "os.PathLike[str]"]) -> Module:
    """Loads the safetensors file ``path`` into ``model``'s parameters in place and returns the
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
