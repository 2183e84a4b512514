"""Puzzles 2-4 (examples/puzzles) at tiny sizes: each runs, prints its table under the thread
count, writes its JSON with the expected fields, refuses unknown flags and skips cleanly on a
missing GPU. Their numbers are for people, not asserts."""

import json
import pathlib
import subprocess
import sys

import pytest

import encore

PUZZLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "puzzles"

TINY = {
    "p2_first_call.py": ["--lengths", "3", "--length0", "40", "--batch", "2", "--channels", "8", "--filters", "8",
                         "--kernel", "3"],
    "p3_cliff.py": ["--batch", "2", "--length", "40", "--channels", "8", "--filters", "8", "--reps", "2"],
    "p4_layout.py": ["--batch", "2", "--length", "40", "--channels", "16", "--filters", "16", "--convs", "2",
                     "--steps", "2"],
}


def run(script, *args):
    return subprocess.run([sys.executable, str(PUZZLES / script), *args], capture_output=True, text=True, timeout=120)


def run_json(tmp_path, script):
    path = tmp_path / "out.json"
    result = run(script, *TINY[script], "--json", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(path.read_text())
    assert f"cpu threads {report['threads']}" in result.stdout.splitlines()[0]
    return result.stdout, report


def test_first_call_counts_searches_retraces_and_the_second_process(tmp_path):
    out, report = run_json(tmp_path, "p2_first_call.py")
    rows = {r["scenario"]: r for r in report["rows"]}
    assert list(rows) == ["eager", "traced_exact", "bucketed", "second_process"]
    for r in rows.values():
        assert len(r["calls"]) == 6
        assert {"ms", "autotunes", "autotune_hits", "autotune_ms", "traces"} <= set(r["calls"][0])
    # Every new length searches once per convolution; the second pass and the second process do not.
    assert rows["eager"]["pass1_autotunes"] > 0 and rows["eager"]["pass2_autotunes"] == 0
    assert rows["traced_exact"]["pass1_traces"] == 3 and rows["traced_exact"]["pass2_traces"] == 0
    assert rows["bucketed"]["pass1_traces"] < 3
    assert rows["second_process"]["pass1_autotunes"] == 0
    assert rows["second_process"]["pass1_autotune_hits"] == rows["eager"]["pass1_autotunes"]


def test_cliff_names_the_implementation_per_policy(tmp_path):
    out, report = run_json(tmp_path, "p3_cliff.py")
    assert report["threads"] == 1 and len(report["rows"]) == 9
    for r in report["rows"]:
        for policy in ("heuristic", "exhaustive", "off"):
            assert r[f"{policy}_ms"] > 0 and r[f"{policy}_impl"]
        assert r["offered"] and all(o["ms"] > 0 for o in r["offered"])
        assert r["exhaustive_impl"] in [o["impl"] for o in r["offered"]]


def test_layout_counts_conversions_per_variant(tmp_path):
    out, report = run_json(tmp_path, "p4_layout.py")
    rows = {r["variant"]: r for r in report["rows"]}
    assert list(rows) == ["native", "channels_first", "blocked"]
    for r in rows.values():
        assert r["step_ms"] > 0 and r["graph_nodes"] > 0 and r["forward_impl"]
    assert rows["native"]["copy_nodes"] == 0 and rows["native"]["reorders_per_step"] == 0
    assert rows["channels_first"]["copy_nodes"] > 0 and rows["channels_first"]["copy_ms"] > 0
    # Blocked: conversion nodes only where the stack meets channels-last (its input, its output
    # and the output's gradient), each run once per step; between the convs none.
    blocked = rows["blocked"]
    assert blocked["copy_nodes"] == 0 and 0 < blocked["conversion_nodes"] <= 3
    assert blocked["reorders_per_step"] == blocked["conversion_nodes"]
    assert blocked["op_counts"]["to_blocked"] >= 1 and rows["native"]["conversion_nodes"] == 0


@pytest.mark.parametrize("script", sorted(TINY))
def test_unknown_flags_are_errors(script):
    result = run(script, "--stpes", "3")
    assert result.returncode == 2 and "unrecognized arguments: --stpes" in result.stderr


@pytest.mark.skipif(encore.cuda.is_available(), reason="a GPU is present")
@pytest.mark.parametrize("script", sorted(TINY))
def test_cuda_without_gpu_skips_cleanly(script):
    result = run(script, "--device", "cuda")
    assert result.returncode == 0 and "skipped" in result.stdout
