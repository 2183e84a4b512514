"""Checkpoints that resume exactly (issue 11): N steps == k steps, save, load in a fresh process,
N - k steps, bit for bit — through train_on_batch, a hand-written loop and fit, eager and traced
— and training checkpoints are safetensors files other tools read."""

import pathlib
import subprocess
import sys

import numpy as np
import pytest
import safetensors.numpy

import encore
from encore import nn

PROGRAM = pathlib.Path(__file__).with_name("resume_program.py")


def run(*args):
    subprocess.run([sys.executable, str(PROGRAM), *map(str, args)], check=True, timeout=120)


@pytest.mark.parametrize("api,total,stop", [("model", 9, 4), ("loop", 9, 5), ("fit", 4, 2)])
@pytest.mark.parametrize("mode", ["eager", "traced"])
def test_resume_in_a_fresh_process_is_bitwise(tmp_path, api, total, stop, mode):
    whole, resumed, ckpt = tmp_path / "whole.npz", tmp_path / "resumed.npz", tmp_path / "ckpt.safetensors"
    run(api, mode, total, whole)
    run(api, mode, total, tmp_path / "first.npz", "--stop-at", stop, "--save", ckpt)
    run(api, mode, total, resumed, "--load", ckpt)
    a, b = np.load(whole), np.load(resumed)
    assert sorted(a.files) == sorted(b.files) and "optimizer/step" in a.files
    for key in a.files:
        assert a[key].tobytes() == b[key].tobytes(), key
    first = np.load(tmp_path / "first.npz")
    assert first["optimizer/step"] != a["optimizer/step"]  # the resumed run did continue


def test_training_checkpoints_are_safetensors_files(tmp_path):
    encore.manual_seed(0)
    model = nn.Sequential([nn.Dense(2), nn.Dropout(0.5), nn.Dense(1)])
    model.compile("adam", "mse")
    model.train_on_batch(np.ones((4, 3), np.float32), np.zeros((4, 1), np.float32))
    path = tmp_path / "ckpt.safetensors"
    model.save_checkpoint(path)
    tensors = safetensors.numpy.load_file(path)
    assert sorted(tensors) == ["generator/cpu", "model/dense.bias", "model/dense.kernel", "model/dense_1.bias",
                               "model/dense_1.kernel", "optimizer/dense.bias.m", "optimizer/dense.bias.v",
                               "optimizer/dense.kernel.m", "optimizer/dense.kernel.v", "optimizer/dense_1.bias.m",
                               "optimizer/dense_1.bias.v", "optimizer/dense_1.kernel.m", "optimizer/dense_1.kernel.v",
                               "optimizer/lr", "optimizer/step"]
    assert tensors["optimizer/step"] == 1 and tensors["optimizer/lr"] == 1e-3
    with safetensors.safe_open(path, "np") as f:
        meta = f.metadata()
    assert meta["checkpoint.parts"] == "model,optimizer,generator" and meta["checkpoint.optimizer"] == "adam"
    assert meta["checkpoint.iterations"] == "1" and meta["encore.version"] == encore.__version__
    # nn.load reads the model part; a checkpoint without encore's checksums (another tool's) loads too.
    other = nn.Sequential([nn.Dense(2), nn.Dropout(0.5), nn.Dense(1)])
    other.build((1, 3))
    nn.load(other, path)
    assert all((p.numpy() == q.numpy()).all() for p, q in zip(other.parameters(), model.parameters()))
    foreign = tmp_path / "foreign.safetensors"
    safetensors.numpy.save_file(tensors, foreign, metadata={k: v for k, v in meta.items()
                                                            if not k.startswith("encore.")})
    other.compile("adam", "mse")
    other.load_checkpoint(foreign)
    assert other.iterations == 1 and other.optimizer.iterations == 1


def test_loading_a_bad_checkpoint_changes_nothing(tmp_path):
    encore.manual_seed(0)
    model = nn.Sequential([nn.Dense(2)])
    model.compile("sgd", "mse")
    model.train_on_batch(np.ones((4, 3), np.float32), np.zeros((4, 2), np.float32))
    path = tmp_path / "ckpt.safetensors"
    model.save_checkpoint(path)
    before = [p.numpy().copy() for p in model.parameters()]
    model.compile("adam", "mse")  # another optimizer kind
    with pytest.raises(ValueError, match="holds the state of a 'sgd' optimizer"):
        model.load_checkpoint(path)
    data = path.read_bytes()
    path.write_bytes(data[:-5])
    model.compile("sgd", "mse")
    with pytest.raises(ValueError, match="truncated"):
        model.load_checkpoint(path)
    with pytest.raises(FileNotFoundError):
        model.load_checkpoint(tmp_path / "missing.safetensors")
    assert all((p.numpy() == b).all() for p, b in zip(model.parameters(), before))
