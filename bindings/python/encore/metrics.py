"""Keras' metric objects for ``compile(metrics=[...])``, beside the names ("accuracy", "mae",
"auc", "precision", "recall", ...)::

    model.compile("adam", "binary_crossentropy", metrics=["accuracy", metrics.AUC(), metrics.Precision()])

AUC, Precision and Recall take binary targets (0 or 1) and probabilities, and are computed from
counts over the whole pass (an epoch, an evaluate), not as means of per-batch values: as Keras'.
MeanAbsoluteError is the per-row mean, averaged over the rows.
"""

from __future__ import annotations

from . import _C

__all__ = ["AUC", "Precision", "Recall", "MeanAbsoluteError"]


def AUC(num_thresholds: int = 200, name: str = "auc") -> _C.Metric:  # noqa: N802  (Keras' class name)
    """Area under the ROC curve from true and false positive counts at ``num_thresholds``
    thresholds (Keras' AUC: thresholds -1e-7, i / (n - 1), 1 + 1e-7; interpolated Riemann sum).
    Within about 1 / num_thresholds of the exact area for well-spread probabilities."""
    return _C.Metric.auc(num_thresholds, name)


def Precision(thresholds: float = 0.5, name: str = "precision") -> _C.Metric:  # noqa: N802
    """True positives over predicted positives (y_pred > thresholds); 0 when nothing is predicted
    positive."""
    return _C.Metric.precision(thresholds, name)


def Recall(thresholds: float = 0.5, name: str = "recall") -> _C.Metric:  # noqa: N802
    """True positives over actual positives (y_pred > thresholds); 0 when there are none."""
    return _C.Metric.recall(thresholds, name)


def MeanAbsoluteError(name: str = "mean_absolute_error") -> str:  # noqa: N802
    """The mean of |y_pred - y_true|, logged under ``name`` (the metric "mae" is the same, logged
    as "mae")."""
    if name not in ("mae", "mean_absolute_error"):
        raise ValueError(f"[MeanAbsoluteError] name must be 'mae' or 'mean_absolute_error', got {name!r}")
    return name
