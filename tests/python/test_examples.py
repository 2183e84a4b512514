"""The Python example programs double as smoke tests: train_fit.py exits non-zero when its model
does not learn; bench_fit.py must run (its numbers are for people, not asserts)."""

import json
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


def test_bench_gpu_peers_runs_on_the_cpu(tmp_path):
    """The PyTorch peer of the GPU check, run on the CPU: encore's runners (and PyTorch eager
    where it is installed) from the same weights, its table and its JSON."""
    out = tmp_path / "peers.json"
    result = run("bench_gpu_peers.py", "--device", "cpu", "--runs", "tiny@4,small@16", "--samples", "2",
                 "--warmup", "1", "--steps-per-sample", "2", "--json", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(out.read_text())
    assert [(r["model"], r["length"]) for r in data["results"]] == [("tiny", 4), ("small", 16)]
    for r in data["results"]:
        assert {"encore_eager", "encore_traced"} <= set(r["runners"])
        assert all(v["median_ms"] > 0 for v in r["runners"].values())
        assert r["ratios"]["encore_traced/encore_eager"] > 0
        # The same weights: every runner predicts what encore's eager model does.
        assert all(d < 1e-4 for d in r["prediction_max_abs_diff"].values()), r["prediction_max_abs_diff"]
        if data["machine"]["torch"]:
            assert "torch_eager" in r["runners"] and "torch_graph" not in r["runners"]
    assert "encore_traced/encore_eager" in result.stdout


def test_bench_gpu_peers_without_a_gpu_says_so():
    import encore
    if encore.cuda.is_available():
        return
    result = run("bench_gpu_peers.py", "--runs", "tiny@4")
    assert result.returncode != 0 and "no CUDA device" in result.stdout + result.stderr


def test_bench_import_maps_no_cuda_library_at_import(tmp_path):
    """The import-time benchmark (issue 28): its table and JSON, and the reason the import is cheap
    with the plugin present: no CUDA library is mapped until CUDA is asked about."""
    out = tmp_path / "import.json"
    result = run("bench_import.py", "--rounds", "1", "--json", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {r["variant"]: r for r in json.loads(out.read_text())["results"]}
    assert set(rows) == {"plugin_present", "plugin_hidden", "then_cuda_query"}
    assert all(r["median_s"] > 0 and r["rounds"] == 1 for r in rows.values())
    assert rows["plugin_present"]["cuda_libraries_mapped"] == []
    assert rows["plugin_hidden"]["cuda_libraries_mapped"] == []
    assert result.stdout.splitlines()[0].split()[:3] == ["variant", "median_s", "min_s"]


def test_bench_recurrent_profiles_where_the_step_goes(tmp_path):
    """The BiLSTM benchmark (issue 29) on a small copy: its table, and --profile's kernel time per
    op for one eager and one traced step, which add up to the step's kernels."""
    out = tmp_path / "bilstm.json"
    result = run("bench_recurrent.py", "--batch", "4", "--length", "24", "--units", "16", "--steps", "1",
                 "--warmup", "0", "--profile", "--json", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    profile = json.loads(out.read_text())["profile"]
    for mode in ("eager", "traced"):
        p = profile[mode]
        assert {"lstm_sequence", "lstm_sequence_backward", "conv1d_fused", "adam_update"} <= set(p["ops"])
        assert abs(sum(o["ms"] for o in p["ops"].values()) - p["kernel_ms"]) < 1e-6
        assert p["kernel_ms"] > 0 and p["wall_ms"] > 0
    assert "outside kernels" in result.stdout
