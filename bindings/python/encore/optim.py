"""Optimizers: one fused update per device over all parameters that have a gradient. The
learning rate lives in a device scalar, so traced steps see a new ``lr`` without retracing.

Every optimizer takes ``global_clipnorm`` (scale all gradients so their joint norm is at most
this) or ``clipvalue`` (clip each element), applied inside ``step()`` with ops, so inside traced
steps too.

Learning-rate schedules (functions of the step, the number of updates done before it) run on the
host: set ``opt.lr = schedule(step)`` before each step, outside the traced function, or pass
``encore.callbacks.LearningRateScheduler(schedule)`` to ``fit``. No retrace either way.
"""

from ._C import SGD, Adam, AdamW, Optimizer, RMSprop, Schedule

step_decay = Schedule.step_decay
exponential_decay = Schedule.exponential_decay
cosine_decay = Schedule.cosine_decay
warmup = Schedule.warmup

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Schedule", "step_decay", "exponential_decay",
           "cosine_decay", "warmup"]
