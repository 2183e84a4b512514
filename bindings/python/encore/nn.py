"""Keras-style layers on batch-major, channels-last tensors ``(batch, steps, channels)``,
Sequential, parameter files and losses."""

from __future__ import annotations

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
    """Writes every parameter (name, dtype, shape, data) of ``model`` to ``path``."""
    _C.save_module(model, os.fspath(path))


def load(model: Module, path: Union[str, "os.PathLike[str]"]) -> Module:
    """Loads parameters by name into ``model`` in place (names, shapes and dtypes must match);
    returns the model."""
    _C.load_module(model, os.fspath(path))
    return model
