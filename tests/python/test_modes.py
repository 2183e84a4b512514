"""Grad and training modes, precision switches, the ledger, autotuning, CUDA queries."""

import json
import os
import subprocess
import sys

import pytest

import encore


def test_no_grad_and_enable_grad_as_context_managers_and_decorators():
    assert encore.is_grad_enabled()
    with encore.no_grad():
        assert not encore.is_grad_enabled()
        with encore.enable_grad():
            assert encore.is_grad_enabled()
        assert not encore.is_grad_enabled()
    assert encore.is_grad_enabled()

    @encore.no_grad()
    def f():
        return encore.is_grad_enabled()

    @encore.no_grad
    def g():
        return encore.is_grad_enabled()

    @encore.enable_grad
    def h():
        return encore.is_grad_enabled()

    assert f() is False and g() is False and encore.is_grad_enabled()
    assert g.__name__ == "g"
    with encore.no_grad():
        assert h() is True
    with encore.set_grad_enabled(False):
        assert not encore.is_grad_enabled()
    assert encore.is_grad_enabled()

    with pytest.raises(KeyError):
        with encore.no_grad():
            raise KeyError
    assert encore.is_grad_enabled()


def test_training_mode():
    assert encore.is_training()
    with encore.training(False):
        assert not encore.is_training()
        with encore.training():
            assert encore.is_training()
    assert encore.is_training()

    @encore.training(False)
    def evaluate():
        return encore.is_training()

    assert evaluate() is False and encore.is_training()
    encore.set_training(False)
    assert not encore.is_training()
    encore.set_training(True)


def test_precision_switches():
    assert encore.allow_tf32() is False
    encore.set_allow_tf32(True)
    assert encore.allow_tf32()
    encore.set_allow_tf32(False)
    before = encore.flush_denormal()
    encore.set_flush_denormal(not before)
    assert encore.flush_denormal() == (not before)
    encore.set_flush_denormal(before)


def test_ledger(tmp_path):
    encore.ledger.reset()
    x = encore.ones(4)
    for _ in range(3):
        x = x + 1
    d = encore.ledger.as_dict()
    assert d["ops_dispatched"] >= 3 and "dispatch_ns" in d
    assert "ops_dispatched" in encore.ledger.table()
    with encore.ledger.profiling():
        assert encore.ledger.is_profiling()
        encore.exp(x)
    assert not encore.ledger.is_profiling()
    assert any(e[1] == "kernel" or e[1] == "op" for e in encore.ledger.events())
    path = tmp_path / "trace.json"
    encore.ledger.write_chrome_trace(path)
    events = json.loads(path.read_text())["traceEvents"]
    # Perfetto's tracks: the process and this thread named; the kernel's op and shapes in its args.
    names = {(e["name"], e["args"]["name"]) for e in events if e["ph"] == "M" and "name" in e["args"]}
    assert ("thread_name", "main") in names and any(n == "process_name" for n, _ in names)
    [exp] = [e for e in events if e["ph"] == "X" and e["name"] == "exp"]
    assert exp["args"]["op"] == "exp" and exp["args"]["inputs"] == ["(4,) float32"], exp
    encore.ledger.profiling(True)
    assert encore.ledger.is_profiling()
    encore.ledger.profiling(False)
    encore.ledger.reset()
    assert encore.ledger.as_dict()["ops_dispatched"] == 0


def test_ledger_shows_the_host_allocators_cache():
    # A freed block stays in the allocator's cache until a tensor of its size takes it again.
    x = encore.zeros(3, 337)
    del x
    assert encore.ledger.as_dict()["host_cached_bytes"] >= 3 * 337 * 4
    assert "host_cached_bytes" in encore.ledger.table()
    reused = encore.ledger.as_dict()["allocations_reused"]
    encore.zeros(3, 337)
    assert encore.ledger.as_dict()["allocations_reused"] == reused + 1


def test_release_cached_memory_empties_the_host_cache():
    kept = encore.ones(1 << 18)  # in a tensor: not cached, not released
    x = encore.zeros(5, 331)
    del x
    assert encore.ledger.as_dict()["host_cached_bytes"] >= 5 * 331 * 4
    encore.release_cached_memory()
    assert encore.ledger.as_dict()["host_cached_bytes"] == 0
    assert "host_cached_bytes" not in encore.ledger.table()
    reused = encore.ledger.as_dict()["allocations_reused"]
    assert float(encore.zeros(5, 331).sum().item()) == 0.0  # allocated afresh
    assert encore.ledger.as_dict()["allocations_reused"] == reused
    assert float(kept.sum().item()) == 1 << 18


def test_autotune_and_cpu_primitives():
    assert encore.autotune.policy() == "heuristic"
    encore.autotune.set_policy("off")
    assert encore.autotune.policy() == "off"
    encore.autotune.set_policy("heuristic")
    encore.autotune.clear_conv1d_primitives()
    encore.conv1d(encore.ones(1, 9, 2), encore.ones(3, 2, 2))
    prims = encore.autotune.conv1d_primitives()
    assert prims and isinstance(prims[0][0], str)
    entries = encore.autotune.entries()
    assert isinstance(entries, list)
    for e in entries:
        assert {"op", "key", "algorithm", "backend"} <= set(e)


def test_autotune_file_loads_as_the_first_call_of_a_process(tmp_path):
    # The file names the cuDNN version that chose its algorithms (none in a CPU-only build);
    # a new process must know its own version before any op has run.
    path = tmp_path / "autotune.txt"
    encore.ones(2) + 1  # like a process that trained before saving
    encore.autotune.save(path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    subprocess.run([sys.executable, "-c", f"import encore; encore.autotune.load({str(path)!r})"],
                   env=env, check=True, timeout=120)


def test_cuda_queries_work_without_a_gpu():
    n = encore.cuda.device_count()
    assert isinstance(n, int) and encore.cuda.is_available() == (n > 0)
    assert isinstance(encore.cuda.is_built(), bool)
    encore.cuda.synchronize()  # a no-op without a GPU
    encore.cuda.synchronize("cpu")


def test_per_shape_states_are_bounded_in_bytes_and_released():
    """Each new convolution length prepares oneDNN primitives (hundreds of KiB each for long
    inputs): the cache of them is bounded in bytes, shown in the ledger, and emptied by
    release_cached_memory."""
    limit = encore.prepared_limit()
    w = encore.randn(5, 8, 16)
    try:
        encore.release_cached_memory()
        assert encore.ledger.as_dict()["prepared_bytes"] == 0
        for length in range(100, 110):
            encore.conv1d(encore.randn(4, length, 8), w, padding="same")
        held = encore.ledger.as_dict()
        assert held["prepared_entries"] >= 10 and held["prepared_bytes"] > 10 * 1024
        assert "prepared_bytes" in encore.ledger.table()
        evictions = held["prepared_evictions"]
        encore.set_prepared_limit(held["prepared_bytes"] // 2)
        assert encore.ledger.as_dict()["prepared_bytes"] <= held["prepared_bytes"] // 2
        assert encore.ledger.as_dict()["prepared_evictions"] > evictions
        for length in range(200, 230):
            encore.conv1d(encore.randn(4, length, 8), w, padding="same")
            assert encore.ledger.as_dict()["prepared_bytes"] <= held["prepared_bytes"] // 2
        encore.release_cached_memory()
        assert encore.ledger.as_dict()["prepared_bytes"] == 0
        assert encore.ledger.as_dict()["prepared_entries"] == 0
        assert "per-shape kernel states: 0 entries" in encore._C.show_config()
    finally:
        encore.set_prepared_limit(limit)
    with pytest.raises(ValueError, match="set_prepared_limit"):
        encore.set_prepared_limit(-1)
    with pytest.raises(TypeError):
        encore.set_prepared_limit("1 MiB")
