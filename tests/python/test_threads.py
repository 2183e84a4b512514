"""One CPU thread pool: its size from encore.set_num_threads or ENCORE_NUM_THREADS, passive
waiting by default, and the count shown by show_config and the ledger."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import encore
from encore import nn, optim


def child(code, **env):
    environ = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT",
                                                               "ENCORE_NUM_THREADS")}
    environ.update(env)
    return subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True)


def test_set_num_threads_reaches_config_and_ledger():
    before = encore.num_threads()
    try:
        encore.set_num_threads(1)
        assert encore.num_threads() == 1
        assert "OpenMP max threads: 1\n" in encore._C.show_config()
        assert encore.ledger.as_dict()["cpu_threads"] == 1
        encore.set_num_threads(2)
        assert "OpenBLAS threads: 2\n" in encore._C.show_config()
    finally:
        encore.set_num_threads(before)
    with pytest.raises(encore.InvalidValueError, match=r"\[set_num_threads\]"):
        encore.set_num_threads(0)


def test_environment_sets_the_pool_and_passive_waiting():
    r = child("import os, encore; print(encore.num_threads(), os.environ['OMP_WAIT_POLICY'])",
              ENCORE_NUM_THREADS="3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["3", "PASSIVE"]
    # The user's own choice is kept.
    r = child("import os, encore; print(os.environ['OMP_WAIT_POLICY'])", OMP_WAIT_POLICY="ACTIVE")
    assert r.stdout.split() == ["ACTIVE"]
    r = child("import encore; encore.num_threads()", ENCORE_NUM_THREADS="many")
    assert r.returncode != 0 and "ENCORE_NUM_THREADS='many'" in r.stderr


def in_forked_child(body, limit=60.0):
    """Runs body() in a forked child; returns what it returned (a JSON value), or fails the
    test when the child hangs (it is killed) or raises."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            out = json.dumps(body())
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            out, code = json.dumps(repr(e)), 1
        os.write(w, out.encode())
        os._exit(code)
    os.close(w)
    deadline = time.monotonic() + limit
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(r)
            pytest.fail("the forked child hung")
        time.sleep(0.01)
    with os.fdopen(r, "rb") as f:
        out = json.loads(f.read() or b"null")
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, out
    return out


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_forked_worker_trains_on_one_thread():
    """A multiprocessing-style worker forked after training on 2 threads: GNU OpenMP cannot
    start workers again in the child (its first parallel kernel used to wait forever), so the
    child runs on one thread; a traced step retraces for it, explained, and the eager and traced
    children agree with each other."""
    before = encore.num_threads()
    encore.set_num_threads(2)
    try:
        encore.manual_seed(0)
        model = nn.Sequential([nn.Conv1D(16, 5, activation="relu"), nn.GlobalAveragePooling1D(), nn.Dense(1)])
        model.build((8, 64, 4))
        opt = optim.SGD(model.parameters(), lr=0.01)
        rng = np.random.default_rng(0)
        x = encore.tensor(rng.standard_normal((8, 64, 4)).astype(np.float32))
        w = encore.tensor(rng.standard_normal((256, 256)).astype(np.float32))

        def step(x):
            opt.zero_grad()
            loss = nn.mean_squared_error(encore.zeros((8, 1)), model(x))
            loss.backward()
            opt.step()
            return loss

        traced = encore.trace(step)
        for _ in range(2):
            traced(x)
            step(x)
        (w @ w).sum().item()  # a parallel GEMM: the workers exist
        weights = [p.numpy().copy() for p in model.parameters()]

        def child():
            out = {"threads": encore.num_threads(), "gemm": float((w @ w).sum().item())}
            out["traced"] = [float(traced(x).item()) for _ in range(2)]
            out["reason"] = traced.stats["records"][-1]["reason"]
            with encore.no_grad():
                for p, v in zip(model.parameters(), weights):
                    p.copy_(encore.tensor(v))
            out["eager"] = [float(step(x).item()) for _ in range(2)]
            try:
                encore.set_num_threads(2)
                out["set"] = "no error"
            except encore.UnsupportedError as e:
                out["set"] = str(e)
            encore.set_num_threads(1)
            out["config"] = encore._C.show_config()
            return out

        got = in_forked_child(child)
        assert got["threads"] == 1
        assert got["gemm"] == pytest.approx(float((w @ w).sum().item()), rel=1e-5)
        assert got["reason"] == "new signature: cpu threads 2 -> 1"
        assert got["traced"] == got["eager"]
        assert "forked after its parent's OpenMP workers had started" in got["set"]
        assert "(pinned: forked after the parent's OpenMP workers started)" in got["config"]
        assert encore.num_threads() == 2  # the parent is unchanged
    finally:
        encore.set_num_threads(before)
