"""Runs one training program eagerly or traced and compares the two runs bit for bit.

A program is a function ``program(run)`` that builds its model from a seed, wraps its step
functions with ``run.trace`` (``encore.trace`` in the traced run, nothing in the eager run)
and performs each top-level action inside ``with run.action(label):``. After every action
the run records the observable state: the watched parameters and their ``.grad`` (None or
values), the modules' buffers, optimizer state and learning rate, watched tensors, the value
the action returned, the default generator's state, the grad/training modes and the train/eval
mode of every module. An exception inside an action is
recorded (its type) and the program goes on.

The fuzzer (fuzz_traced.py) pastes this file above a program to make a standalone reproduction,
so it depends on nothing but encore and NumPy.
"""

import contextlib
import math
import struct

import numpy as np

import encore
import encore.nn as nn
import encore.optim as optim


def module_modes(module):
    """The train/eval flag of `module` and of every module inside it, depth first."""
    with encore.training(True):  # the modules' own flags, whatever the global mode
        modes = [module.training]
    for _, child in module.children():
        modes += module_modes(child)
    return tuple(modes)


def snapshot(value):
    """A copy of `value` that later calls cannot change: arrays for tensors, tuples for
    sequences, the value itself otherwise."""
    if isinstance(value, encore.Tensor):
        return np.array(value.numpy(), copy=True)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(snapshot(v) for v in value))
    return value


def equal_elements(a, b):
    """Elementwise bitwise equality of two arrays of one dtype and shape; NaNs are equal
    whatever their payload."""
    if a.dtype.kind != "f":
        return a == b
    bits = f"u{a.itemsize}"
    return (a.view(bits) == b.view(bits)) | (np.isnan(a) & np.isnan(b))


def same(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return False
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.all(equal_elements(a, b)))
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))
    return type(a) is type(b) and a == b


def describe(value):
    if isinstance(value, np.ndarray):
        return f"{value.dtype}{list(value.shape)} {np.array2string(value.ravel()[:8], precision=9)}"
    return repr(value)


def contrast(key, e, t):
    text = f"{key}:\n    eager  {describe(e)}\n    traced {describe(t)}"
    if isinstance(e, np.ndarray) and isinstance(t, np.ndarray) and e.dtype == t.dtype and e.shape == t.shape:
        differ = np.flatnonzero(~equal_elements(e, t).ravel())
        i = differ[0]
        # The shortest text that tells the two values apart in their own dtype.
        show = (lambda v: np.format_float_positional(v, unique=True)) if e.dtype.kind == "f" else str
        text += (f"\n    {len(differ)} of {e.size} elements differ; the first, flat index {i}: "
                 f"eager {show(e.ravel()[i])} traced {show(t.ravel()[i])}")
    return text


class Run:
    """One run of a program; `log` holds (label, error type or None, state, retrace note)."""

    def __init__(self, traced):
        self.traced = traced
        self.log = []
        self.watched = {}
        self.out = None
        self.kept = []  # every returned value, for re-reading later
        # Children or parameters set or removed (swap_layer): a module's guard retraces after any
        # such change, even one that restores an earlier structure.
        self.structure_changes = 0
        self._aliased = set()  # functions whose outputs the next replay may overwrite
        self._seen = {}  # traced function -> signatures it has been called with
        self._retrace = None
        encore._C._set_grad_enabled(True)
        encore.set_training(True)

    def watch(self, **things):
        """Modules, optimizers and tensors whose state is compared after every action."""
        self.watched.update(things)

    def trace(self, fn, **options):
        wrapped = encore.trace(fn, **options) if self.traced else fn
        if options.get("alias_outputs"):
            self._aliased.add(wrapped)
        return wrapped

    def call(self, fn, *args):
        """Calls a step function; in the traced run, also checks that a signature it has
        seen before does not trace again."""
        key = self._signature(args) if self.traced else None
        before = fn.stats["traces"] if self.traced else 0
        self.out = fn(*args)
        if self.traced:
            seen = self._seen.setdefault(fn, set())
            # With no more signatures than the cache holds, nothing can have been evicted.
            # Nested calls also fill the cache: an eviction explains itself in the reason.
            evicted = "evicted" in fn.stats["records"][-1]["reason"] if fn.stats["records"] else False
            if key in seen and len(seen) <= fn.options["max_cached"] and fn.stats["traces"] > before and not evicted:
                self._retrace = f"{fn.name} traced again: {fn.stats['records'][-1]['reason']}"
            seen.add(key)
        if fn not in self._aliased:
            self.kept.append(self.out)
        return self.out

    def clear(self, fn):
        """Empties a traced function's cache (nothing to do in the eager run)."""
        if self.traced:
            fn.clear()
            self._seen.pop(fn, None)

    def _signature(self, args):
        # Conservative: everything a trace may legitimately key on (so a retrace on a repeat of
        # it is a real one), with floats compared by bits (0.0 and -0.0 differ, NaN is NaN).
        parts = []
        for a in args:
            if isinstance(a, encore.Tensor):
                parts.append((a.shape, str(a.dtype), a.strides, a.requires_grad))
            elif isinstance(a, np.ndarray):
                parts.append((a.shape, str(a.dtype), a.strides))
            elif isinstance(a, float):
                parts.append(struct.pack("<d", a))
            else:
                parts.append((type(a).__name__, a))
        state = []
        for obj in self.watched.values():
            if isinstance(obj, nn.Module):
                # Storage identity too: a trace captures a parameter's and its gradient's storage,
                # and retraces (as documented) once either is replaced. Serial numbers, not
                # addresses: a replacement may get the freed block back (fuzzer program 231:3360).
                state.append(tuple((p._storage_serial, p.grad is not None and p.grad._storage_serial, p.requires_grad)
                                   for p in obj.parameters()))
                state.append(module_modes(obj))
            elif isinstance(obj, optim.Optimizer):
                state.append(tuple(sorted(obj.state())))
        return (tuple(parts), encore.is_grad_enabled(), encore.is_training(), tuple(state), self.structure_changes)

    @contextlib.contextmanager
    def action(self, label):
        self.out, self._retrace, error = None, None, None
        try:
            yield
        except Exception as e:  # noqa: BLE001 (every error type is compared)
            error = f"{type(e).__name__}: {str(e)[:300]}"
        self.log.append((label, error, self.state(), self._retrace))

    def state(self):
        s = {}
        for name, obj in self.watched.items():
            if isinstance(obj, nn.Module):
                for pname, p in obj.named_parameters():
                    s[f"{name}.{pname}"] = snapshot(p)
                    s[f"{name}.{pname}.grad"] = snapshot(p.grad)
                for bname, b in obj.named_buffers():  # BatchNormalization's moving statistics
                    s[f"{name}.{bname}"] = snapshot(b)
                s[f"{name}.modes"] = module_modes(obj)
            elif isinstance(obj, optim.Optimizer):
                s[f"{name}.lr"] = obj.lr
                for k, t in obj.state().items():
                    s[f"{name}.{k}"] = snapshot(t)
            else:
                s[name] = snapshot(obj)
        s["returned"] = snapshot(self.out)
        s["generator"] = snapshot(encore.default_generator().state)
        s["modes"] = (encore.is_grad_enabled(), encore.is_training())
        return s


def first_difference(eager, traced):
    """None, or (action index, label, kind, what, details) for the first action whose result
    differs: kind "error" (what: the two error types), "value" or "value after error" (both
    raised the same error; what: the state keys that differ) or "retrace" (what: the function's
    name)."""
    for i, ((label, e_err, e_state, _), (_, t_err, t_state, retrace)) in enumerate(zip(eager, traced)):
        e_type = e_err and e_err.split(":")[0]
        t_type = t_err and t_err.split(":")[0]
        if e_type != t_type:
            return i, label, "error", [e_type, t_type], f"eager raised {e_err}\n  traced raised {t_err}"
        keys = sorted(k for k in e_state.keys() | t_state.keys() if not same(e_state.get(k), t_state.get(k)))
        if keys:
            lines = [contrast(k, e_state.get(k), t_state.get(k)) for k in keys]
            # After an error both runs raised, the state still has to agree (what the eager run
            # did before raising), but that is told apart from a silent difference.
            kind = "value after error" if e_type else "value"
            return i, label, kind, keys, "\n  ".join(lines)
        if retrace:
            return i, label, "retrace", [retrace.split(" ")[0]], retrace
    if len(eager) != len(traced):
        return min(len(eager), len(traced)), "end", "error", ["length"], f"{len(eager)} vs {len(traced)} actions"
    return None


def execute(program, traced):
    run = Run(traced)
    try:
        program(run)
    except Exception as e:  # noqa: BLE001 (an error outside the actions: building the model)
        run.log.append(("setup", f"{type(e).__name__}: {str(e)[:300]}", {}, None))
    return run.log


def differs(program):
    """Runs `program` eagerly and traced; the first difference (see first_difference) or None."""
    return first_difference(execute(program, traced=False), execute(program, traced=True))


def main(program):
    found = differs(program)
    if found is None:
        print("eager and traced runs agree")
        return 0
    index, label, kind, _, details = found
    print(f"action {index} `{label}`: traced differs from eager ({kind})\n  {details}")
    return 1
