"""The Python example programs double as smoke tests: train_fit.py exits non-zero when its model
does not learn; bench_fit.py must run (its numbers are for people, not asserts)."""

import pathlib
import subprocess
import sys

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def run(script, *args):
    return subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True,
                          timeout=300)


def test_train_fit_learns_and_shows_progress_and_cost():
    result = run("train_fit.py", "--epochs", "6")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "Epoch 1/6" in out and "/step - loss: " in out and " - val_accuracy: " in out
    assert "cost (traced): 4 traces (train_step call 1: first call; " in out
    assert "resumed at epoch " in out


def test_bench_fit_prints_its_table():
    result = run("bench_fit.py", "--repeats", "1", "--epochs", "1", "--models", "tiny_dense")
    assert result.returncode == 0, result.stdout + result.stderr
    header, row = result.stdout.splitlines()[:2]
    assert header.split()[:4] == ["model", "device", "steps", "fit_us/step"] and row.startswith("tiny_dense")


def test_bench_rnn_fused_runs_both_cells():
    for cell in ("lstm", "gru"):
        result = run("bench_rnn_fused.py", "--cell", cell, "--batch", "2", "--length", "5", "--units", "8",
                     "--steps", "1", "--warmup", "0")
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.splitlines()[1].split() == ["implementation", "step_ms", "vs", "composed"]
