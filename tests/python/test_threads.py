"""One CPU thread pool: its size from encore.set_num_threads or ENCORE_NUM_THREADS, passive
waiting by default, and the count shown by show_config and the ledger."""

import os
import subprocess
import sys

import pytest

import encore


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
