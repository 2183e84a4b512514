"""The performance puzzles (examples/puzzles/) run with tiny sizes: their JSON has the fields
the pages cite, and the trace counts are what each puzzle claims (never their times)."""

import json
import pathlib
import subprocess
import sys

import pytest

PUZZLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "puzzles"


def run(script, *args):
    return subprocess.run([sys.executable, str(PUZZLES / script), *args], capture_output=True, text=True,
                          timeout=300)


def test_eager_vs_graph_reports_kernel_and_overhead_per_run(tmp_path):
    out = tmp_path / "p1.json"
    result = run("p1_eager_vs_graph.py", "--runs", "small@140,large@140", "--batch", "2", "--steps", "1",
                 "--warmup", "0", "--profile-steps", "1", "--threads", "1", "--json", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "cpu threads 1" in result.stdout.splitlines()[0]
    d = json.loads(out.read_text())
    assert d["puzzle"] == "eager_vs_graph" and d["threads"] == 1 and d["batch"] == 2
    [row] = d["rows"]
    assert row["run"] == "small@140" and row["input"] == "2x140x30" and row["nodes"] > 0
    for key in ("eager_ms", "traced_ms", "speedup", "kernel_ms", "eager_overhead_ms", "traced_overhead_ms"):
        assert row[key] > 0 or key.endswith("overhead_ms") and row[key] >= 0, key
    assert 0 <= row["overhead_share"] < 1 and row["bound"] >= 1
    # The model its data is too short for is skipped with encore's error, not a crash.
    assert "too short for kernel size 400" in d["skipped"]["large@140"]
    report = d["reports"]["small@140"]
    modes = {m["mode"]: m for m in report["modes"]}
    assert modes["traced"]["traces"] == 1 and modes["eager"]["traces"] == 0
    assert d["conclusion"] and "small@140" in d["conclusion"][0]


def test_predict_trace_counts_are_what_the_puzzle_claims(tmp_path):
    out, png = tmp_path / "p5.json", tmp_path / "p5.png"
    result = run("p5_predict.py", "--calls", "3", "--warmup", "1", "--profile-steps", "1", "--tiny-batch", "2",
                 "--medium-batch", "2", "--json", str(out), "--plot", str(png))
    assert result.returncode == 0, result.stdout + result.stderr
    assert png.exists() or "matplotlib is not installed" in result.stdout
    d = json.loads(out.read_text())
    assert d["puzzle"] == "predict" and d["threads"] >= 1
    rows = {(r["model"], r["way"]): r for r in d["rows"]}
    calls = 1 + 1 + 3  # first call, warm-up, measured
    for model in ("tiny", "medium"):
        traces = {way: rows[(model, way)]["traces"] for way in
                  ("eager", "traced", "eager_new_batch", "retrace_per_call", "new_function", "Module.predict",
                   "predict_on_batch")}
        # Traced once then replayed; a new batch size or a new traced function: a trace every call;
        # Module.predict traced its step before the timed calls.
        assert traces == {"eager": 0, "traced": 1, "eager_new_batch": 0, "retrace_per_call": calls,
                          "new_function": calls, "Module.predict": 0, "predict_on_batch": 0}, model
        assert all(rows[(model, w)]["calls"] == calls for w in traces)
        assert rows[(model, "eager")]["kernel_us"] > 0 and rows[(model, "retrace_per_call")]["kernel_us"] is None
    assert len(d["conclusion"]) == 5 and set(d["reports"]) == {"tiny", "medium"}


@pytest.mark.parametrize("script", ["p1_eager_vs_graph.py", "p5_predict.py"])
def test_gpu_variant_skips_cleanly_and_unknown_flags_are_errors(script):
    import encore

    if not encore.cuda.is_available():
        result = run(script, "--device", "cuda")
        assert result.returncode == 0 and "skipped: --device cuda: no CUDA device" in result.stdout
    result = run(script, "--stpes", "3")
    assert result.returncode == 2 and "unrecognized arguments: --stpes" in result.stderr


def test_eager_vs_graph_names_a_bad_run():
    result = run("p1_eager_vs_graph.py", "--runs", "small@140:0")
    assert result.returncode == 2 and "'small@140:0' is not MODEL@LENGTH or MODEL@LENGTH:BATCH" in result.stderr


def test_predict_says_the_ways_converge_only_where_they_do():
    # Issue 28: the conclusion said "the ways converge" next to traced at 14x eager.
    sys.path.insert(0, str(PUZZLES))
    import p5_predict

    def rows(medium_traced_us):
        ways = {"eager": 2000.0, "traced": medium_traced_us, "eager_new_batch": 2000.0, "retrace_per_call": 2100.0,
                "new_function": 3000.0, "Module.predict": 1900.0, "predict_on_batch": 1900.0}
        out = []
        for model, scale in (("tiny", 0.001), ("medium", 1.0)):
            for way, us in ways.items():
                out.append({"model": model, "way": way, "per_call_us": us * scale, "vs_eager": us / 2000.0,
                            "kernel_us": 1800.0 * scale, "traces": 0, "calls": 5})
        return out

    close = p5_predict.conclusion(rows(2100.0))[-1]
    assert "the ways converge (within 11%)" in close
    far = p5_predict.conclusion(rows(28000.0))[-1]
    assert "converge" not in far and "differ by up to 14.7x although kernels are 90% of an eager call" in far
