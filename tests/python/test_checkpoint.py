"""encore.nn.save / encore.nn.load: safetensors files, read and written by the PyPI
`safetensors` package too; atomic saves (SIGKILL, full disk); strict all-or-nothing loads."""

import errno
import json
import os
import random
import re
import signal
import stat
import struct
import subprocess
import sys
import time
import zlib

import numpy as np
import pytest
import safetensors.numpy
from safetensors import safe_open

import encore
from encore import nn

TEMPORARY = re.compile(r"\.\d+-\d+\.tmp$")  # <target>.<pid>-<n>.tmp


def small_model(seed, dtype="float32"):
    """Dense(3) on 2 features: dense.kernel (2, 3) and dense.bias (3,), random values."""
    m = nn.Sequential([nn.Dense(3)])
    m.build((1, 2))
    m.to(dtype)
    rng = np.random.default_rng(seed)
    for p in m.parameters():
        p.numpy()[...] = rng.standard_normal(p.shape)
    return m


def snapshot(model):
    return [p.numpy().copy() for p in model.parameters()]


def assert_unchanged(model, before):
    for p, b in zip(model.parameters(), before):
        assert p.numpy().tobytes() == b.tobytes()


def expect_load_fails(model, path, match, kind=ValueError):
    before = snapshot(model)
    with pytest.raises(kind, match=match):
        nn.load(model, path)
    assert_unchanged(model, before)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_round_trip_is_bitwise(tmp_path, dtype):
    a = nn.Sequential([nn.Conv1D(4, 3), nn.Dense(2)])
    a.build((1, 5, 2))
    a.to(dtype)
    rng = np.random.default_rng(1)
    for p in a.parameters():
        p.numpy()[...] = rng.standard_normal(p.shape)
    b = nn.Sequential([nn.Conv1D(4, 3), nn.Dense(2)])
    b.build((1, 5, 2))
    b.to(dtype)
    path = tmp_path / "model.safetensors"
    nn.save(a, path)  # os.PathLike
    assert nn.load(b, str(path)) is b
    for (na, pa), (nb, pb) in zip(a.named_parameters(), b.named_parameters()):
        assert na == nb and pb.dtype == getattr(encore, dtype)
        assert pa.numpy().tobytes() == pb.numpy().tobytes()
    assert os.listdir(tmp_path) == ["model.safetensors"]


def test_every_truncation_fails_and_leaves_the_model_untouched(tmp_path):
    good, cut = tmp_path / "good.safetensors", tmp_path / "cut.safetensors"
    nn.save(small_model(1), good)
    data = good.read_bytes()
    b = small_model(2)
    before = snapshot(b)
    for n in range(len(data)):
        cut.unlink(missing_ok=True)
        cut.write_bytes(data[:n])
        with pytest.raises(ValueError):
            nn.load(b, cut)
        assert_unchanged(b, before)


def test_every_single_bit_flip_is_detected(tmp_path):
    good, bad = tmp_path / "good.safetensors", tmp_path / "bad.safetensors"
    nn.save(small_model(1), good)
    data = good.read_bytes()
    b = small_model(2)
    before = snapshot(b)
    undetected = []
    for i in range(len(data)):
        for bit in range(8):
            flipped = bytearray(data)
            flipped[i] ^= 1 << bit
            bad.unlink(missing_ok=True)
            bad.write_bytes(bytes(flipped))
            try:
                nn.load(b, bad)
                undetected.append((i, bit))
            except ValueError as e:
                assert str(bad) in str(e)
            assert_unchanged(b, before)
    assert not undetected


def test_mismatched_files_are_errors_and_leave_the_model_untouched(tmp_path):
    m = small_model(1)
    path = tmp_path / "m.safetensors"
    kernel, bias = np.ones((2, 3), np.float32), np.ones(3, np.float32)
    # The first tensor matches each time: a load that wrote as it went would change the model.
    save = safetensors.numpy.save_file
    save({"dense.kernel": kernel}, path)
    expect_load_fails(m, path, "has no tensor 'dense.bias'")
    save({"dense.kernel": kernel, "dense.bias": bias, "extra": bias}, path)
    expect_load_fails(m, path, "tensor 'extra' in .* is not a parameter of the model")
    save({"dense.kernel": kernel, "dense.bias": np.ones(4, np.float32)}, path)
    expect_load_fails(m, path, re.escape("'dense.bias' is (3,) in the model but (4,)"),
                      encore.ShapeError)
    save({"dense.kernel": kernel, "dense.bias": bias.astype(np.float64)}, path)
    expect_load_fails(m, path, "'dense.bias' is float32 in the model but float64")
    save({"dense.kernel": kernel, "dense.bias": bias.astype(np.float16)}, path)
    expect_load_fails(m, path, "tensor 'dense.bias' in .* has dtype F16, which encore does not")
    # A duplicate name, which only another writer can produce.
    entry = '"dense.bias":{"dtype":"F32","shape":[3],"data_offsets":[%d,%d]}'
    header = ('{"dense.kernel":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},'
              + entry % (24, 36) + "," + entry % (36, 48) + "}").encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(48))
    expect_load_fails(m, path, "names 'dense.bias' twice")
    # Trailing garbage, after an encore file and after another writer's.
    nn.save(small_model(5), path)
    path.write_bytes(path.read_bytes() + b"\0")
    expect_load_fails(m, path, "1 bytes of trailing data")
    safetensors.numpy.save_file({"dense.kernel": kernel, "dense.bias": bias}, path)
    path.write_bytes(path.read_bytes() + b"garbage")
    expect_load_fails(m, path, "7 bytes of trailing data")


def test_missing_file_is_file_not_found(tmp_path):
    m = small_model(1)
    before = snapshot(m)
    with pytest.raises(FileNotFoundError) as e:
        nn.load(m, tmp_path / "missing.safetensors")
    assert isinstance(e.value, encore.FileError) and e.value.filename == str(tmp_path / "missing.safetensors")
    expect_load_fails(m, tmp_path, "it is a directory", IsADirectoryError)
    assert_unchanged(m, before)


def test_files_written_by_encore_are_read_by_safetensors(tmp_path):
    m = small_model(3, "float64")
    path = tmp_path / "m.safetensors"
    nn.save(m, path)
    loaded = safetensors.numpy.load_file(path)
    assert sorted(loaded) == ["dense.bias", "dense.kernel"]
    for name, p in m.named_parameters():
        assert loaded[name].dtype == np.float64
        np.testing.assert_array_equal(loaded[name], p.numpy())
    with safe_open(path, framework="numpy") as f:
        metadata = f.metadata()
    assert metadata["encore.format"] == "1"
    assert metadata["encore.version"] == encore.__version__
    assert re.fullmatch("[0-9a-f]{8}", metadata["encore.data_crc32"])


def test_files_written_by_safetensors_load_into_encore(tmp_path):
    rng = np.random.default_rng(4)
    arrays = {"dense.kernel": rng.standard_normal((2, 3)).astype(np.float32),
              "dense.bias": rng.standard_normal(3).astype(np.float32)}
    path = tmp_path / "theirs.safetensors"
    safetensors.numpy.save_file(arrays, path, metadata={"format": "np"})
    m = small_model(1)
    nn.load(m, path)
    for name, p in m.named_parameters():
        np.testing.assert_array_equal(p.numpy(), arrays[name])


def encore_header(path):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]), data[8:8 + n], data[8 + n:]


def encore_dump(header):
    """The header text encore writes: compact JSON, keys sorted, padded with spaces to 8 bytes."""
    text = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return text + b" " * (-len(text) % 8)


def test_header_checksum_covers_the_header_as_written(tmp_path):
    path = tmp_path / "m.safetensors"
    nn.save(small_model(1), path)
    header, raw, data = encore_header(path)
    assert encore_dump(header) == raw
    stored = header["__metadata__"].pop("encore.header_crc32")
    assert stored == "%08x" % zlib.crc32(encore_dump(header))
    assert header["__metadata__"]["encore.data_crc32"] == "%08x" % zlib.crc32(data)
    # A file of a later format, checksums and all, is refused with the reason.
    header["__metadata__"]["encore.format"] = "2"
    header["__metadata__"]["encore.header_crc32"] = "%08x" % zlib.crc32(encore_dump(header))
    text = encore_dump(header)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    expect_load_fails(small_model(2), path, "has encore format 2 .* reads format 1")
    # Rewritten by another tool with encore's metadata kept: no longer verifiable.
    header, _, data = encore_header(path)
    text = json.dumps(header, indent=1).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    expect_load_fails(small_model(2), path, "its header is not as encore wrote it")


SAVER = """
import os, sys, time
import encore
from encore import nn
path = sys.argv[1]
models = []
for seed in (1, 2):
    encore.manual_seed(seed)
    m = nn.Sequential([nn.Dense(1024)])
    m.build((1, 2048))
    models.append(m)
if not os.path.exists(path):
    nn.save(models[0], path + ".a")
    nn.save(models[1], path + ".b")
start = time.perf_counter()
nn.save(models[0], path)
print(time.perf_counter() - start, flush=True)  # ready, and how long a save takes
for i in range(1, 100000):
    nn.save(models[i % 2], path)
"""


def test_sigkill_during_saves_leaves_the_old_or_the_new_file(tmp_path):
    """A child saving an 8 MB model over and over is killed at random moments, 30 times."""
    path = tmp_path / "ckpt.safetensors"
    rng = random.Random(7)
    for kill in range(30):
        child = subprocess.Popen([sys.executable, "-c", SAVER, str(path)], stdout=subprocess.PIPE,
                                 text=True)
        try:
            save_seconds = float(child.stdout.readline())
            time.sleep(rng.uniform(0, 3 * save_seconds))  # kills land in every phase of a save
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
        assert child.returncode == -signal.SIGKILL
        loaded = safetensors.numpy.load_file(path)
        refs = [safetensors.numpy.load_file(f"{path}.{w}") for w in "ab"]
        assert any(all(np.array_equal(loaded[k], ref[k]) for k in ref) for ref in refs), kill
        m = nn.Sequential([nn.Dense(1024)])
        m.build((1, 2048))
        nn.load(m, path)  # and it verifies
    names = set(os.listdir(tmp_path)) - {path.name, path.name + ".a", path.name + ".b"}
    assert all(n.startswith("ckpt.safetensors.") and TEMPORARY.search(n) for n in names), names
    # The next save removes the temporaries of the killed ones (their processes are gone).
    nn.save(small_model(1), path)
    assert set(os.listdir(tmp_path)) == {path.name, path.name + ".a", path.name + ".b"}


def test_full_disk_is_an_error_and_keeps_the_previous_file(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    nn.save(small_model(1), path)
    before = path.read_bytes()
    child = subprocess.run([sys.executable, "-c", """
import resource, signal, sys
import encore
from encore import nn
m = nn.Sequential([nn.Dense(1024)])
m.build((1, 1024))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
resource.setrlimit(resource.RLIMIT_FSIZE, (65536, hard))
try:
    nn.save(m, sys.argv[1])
except encore.FileError as e:
    print(e.errno, e.filename, e)
else:
    print("saved")
""", str(path)], capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    assert child.stdout.startswith(f"{errno.EFBIG} {path} [save] cannot write {path}: ")
    assert "File too large" in child.stdout
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.safetensors"]


def test_failed_saves_are_os_errors_naming_the_path(tmp_path):
    m = small_model(1)
    missing = tmp_path / "missing" / "m.safetensors"
    with pytest.raises(FileNotFoundError, match="cannot create a temporary file .* No such file") as e:
        nn.save(m, missing)
    assert isinstance(e.value, encore.FileError) and isinstance(e.value, encore.Error)
    assert e.value.errno == errno.ENOENT and e.value.filename == str(missing)
    assert str(e.value).startswith(f"[save] cannot write {missing}: ")
    (tmp_path / "taken").mkdir()
    with pytest.raises(IsADirectoryError, match="it is a directory"):
        nn.save(m, tmp_path / "taken")
    assert os.listdir(tmp_path) == ["taken"]
    if os.geteuid() != 0:  # root ignores permissions
        (tmp_path / "taken").chmod(0o500)
        with pytest.raises(PermissionError):
            nn.save(m, tmp_path / "taken" / "m.safetensors")
        (tmp_path / "taken").chmod(0o700)
    # Bad values stay ValueErrors.
    with pytest.raises(ValueError, match="NUL"):
        nn.save(m, str(tmp_path / "a\0b"))


def test_targets_that_are_not_regular_files_are_refused(tmp_path):
    """Saving renames a new file over the path: a FIFO or a device there would be replaced (and
    a FIFO opened for writing would wait for a reader)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    m = small_model(1)
    writers = {"nn.save": lambda p: nn.save(m, p), "autotune.save": encore.autotune.save,
               "write_chrome_trace": encore.ledger.write_chrome_trace}
    for name, write in writers.items():
        with pytest.raises(encore.FileError, match="it is a FIFO, not a regular file") as e:
            write(fifo)
        assert e.value.filename == str(fifo), name
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert os.listdir(tmp_path) == ["fifo"]


def test_a_killed_save_leaves_a_temporary_that_the_next_save_removes(tmp_path):
    """A child is killed the moment its save's temporary file appears (an 8 MB model: the write and
    the sync take milliseconds); this process's next save of the same path removes it."""
    path = tmp_path / "ckpt.safetensors"
    nn.save(small_model(1), path)
    left = []
    for _attempt in range(5):
        child = subprocess.Popen([sys.executable, "-c", """
import sys
from encore import nn
m = nn.Sequential([nn.Dense(1024)])
m.build((1, 2048))
print("ready", flush=True)
sys.stdin.readline()
nn.save(m, sys.argv[1])
""", str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout.readline() == "ready\n"
            child.stdin.write("go\n")
            child.stdin.flush()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and child.poll() is None:
                left = [n for n in os.listdir(tmp_path) if TEMPORARY.search(n)]
                if left:
                    break
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
        left = [n for n in os.listdir(tmp_path) if TEMPORARY.search(n)]
        if left:
            break
    assert left, "no kill landed during a save"
    nn.save(small_model(2), path)
    assert os.listdir(tmp_path) == ["ckpt.safetensors"]


def test_a_nul_byte_in_a_path_is_an_error_not_a_cut(tmp_path):
    m = small_model(1)
    m.compile("adam", "mse")
    path = str(tmp_path / "fresh\0.ignored")
    calls = {
        "save": lambda: nn.save(m, path), "load": lambda: nn.load(m, path),
        "save_checkpoint": lambda: nn.save_checkpoint(m, path), "load_checkpoint": lambda: nn.load_checkpoint(m, path),
        "autotune.save": lambda: encore.autotune.save(path), "autotune.load": lambda: encore.autotune.load(path),
        "write_chrome_trace": lambda: encore.ledger.write_chrome_trace(path),
        "model_checkpoint": lambda: encore.callbacks.ModelCheckpoint(path),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=re.escape(f"[{name}] path contains a NUL byte")):
            call()
    for method in (m.save_checkpoint, m.load_checkpoint):
        with pytest.raises(ValueError, match="NUL byte"):
            method(path)
    assert os.listdir(tmp_path) == []


def test_a_header_too_large_to_load_is_refused_at_save(tmp_path):
    m = small_model(1)
    message = r"\[save\] the header of .* bytes, more than the 100000000 bytes load accepts"
    with pytest.raises(ValueError, match=message):
        nn.save_checkpoint(m, tmp_path / "big.ck", metadata={"note": "x" * 10**8})
    assert os.listdir(tmp_path) == []
    nn.save_checkpoint(m, tmp_path / "ok.ck", metadata={"note": "x" * 10**6})
    assert nn.load_checkpoint(m, tmp_path / "ok.ck")["note"] == "x" * 10**6
