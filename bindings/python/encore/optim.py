"""Optimizers: one fused update per device over all parameters that have a gradient. The
learning rate lives in a device scalar, so traced steps see a new ``lr`` without retracing."""

from ._C import SGD, Adam, Optimizer

__all__ = ["Optimizer", "SGD", "Adam"]
