"""The verdicts of the GPU check (tests/gpu/report.py), which run on the lent GPU machine: a
test skipped for want of a GPU is a failure there, a run cut short is too, and the table says
so. (The check's dry run itself is the CTest test gpu_check_dry_run.)"""

import json
import pathlib
import subprocess
import sys

REPORT = pathlib.Path(__file__).resolve().parents[1] / "gpu" / "report.py"

GTEST_XML = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="4" failures="0" disabled="0" errors="0" name="AllTests">
  <testsuite name="CudaCapture" tests="2" failures="0" skipped="0">
    <testcase name="OneGraphLaunchPerReplayedStep" status="run" result="completed" classname="CudaCapture" />
    <testcase name="FunctionThatWritesItsArgumentsReplays" status="run" result="completed" classname="CudaCapture" />
  </testsuite>
  <testsuite name="EveryOp/OpTable" tests="2" failures="0" skipped="1">
    <testcase name="CudaMatchesTheCpu/onednn_lstm" status="run" result="skipped" classname="EveryOp/OpTable">
      <skipped message="tests/cpp/test_op_table.cpp:117&#x0A;a CPU fast path" />
    </testcase>
    <testcase name="CudaMatchesTheCpu/add" status="run" result="completed" classname="EveryOp/OpTable" />
  </testsuite>
</testsuites>
"""


def report(*args):
    return subprocess.run([sys.executable, str(REPORT), *args], capture_output=True, text=True, timeout=60)


def test_passing_run_with_a_legitimate_skip(tmp_path):
    xml = tmp_path / "cuda.xml"
    xml.write_text(GTEST_XML)
    r = report("junit", str(xml))
    assert r.returncode == 0, r.stdout
    assert r.stdout.splitlines()[0] == "4 tests, 0 failed, 1 skipped"


def test_a_test_that_found_no_gpu_is_a_failure(tmp_path):
    xml = tmp_path / "cuda.xml"
    xml.write_text(GTEST_XML.replace(
        '<testcase name="OneGraphLaunchPerReplayedStep" status="run" result="completed" classname="CudaCapture" />',
        '<testcase name="OneGraphLaunchPerReplayedStep" status="run" result="skipped" classname="CudaCapture">'
        '<skipped message="tests/cpp/test_cuda_capture.cpp:150&#x0A;no CUDA device" /></testcase>'))
    r = report("junit", str(xml))
    assert r.returncode == 1
    assert r.stdout.splitlines()[0] == "4 tests, 0 failed, 2 skipped, 1 of them for want of a GPU (failures here)"
    assert "CudaCapture.OneGraphLaunchPerReplayedStep" in r.stdout


def test_failures_and_missing_results(tmp_path):
    xml = tmp_path / "python.xml"
    xml.write_text('<testsuites><testsuite name="pytest" tests="2">'
                   '<testcase classname="tests.python.test_gpu" name="test_a">'
                   '<failure message="assert 1 == 2" /></testcase>'
                   '<testcase classname="tests.python.test_gpu" name="test_b"><skipped type="pytest.skip" '
                   'message="torch sees no GPU" /></testcase></testsuite></testsuites>')
    r = report("junit", str(xml), str(tmp_path / "never-written.xml"))
    assert r.returncode == 1
    first = r.stdout.splitlines()[0]
    assert first.startswith("2 tests, 1 failed, 1 skipped, 1 of them for want of a GPU")
    assert "no results from never-written.xml" in first


def test_sanitizer_summary(tmp_path):
    log = tmp_path / "memcheck.log"
    log.write_text("========= COMPUTE-SANITIZER\n[  PASSED  ] 3 tests.\n========= ERROR SUMMARY: 0 errors\n")
    assert report("sanitizer", str(log)).stdout == "0 errors\n"
    log.write_text("========= Invalid __global__ write of size 4 bytes\n========= ERROR SUMMARY: 2 errors\n")
    r = report("sanitizer", str(log))
    assert r.returncode == 1 and r.stdout.startswith("2 errors\n  ========= Invalid __global__ write")
    log.write_text("[ RUN      ] CudaCapture.OneGraphLaunchPerReplayedStep\n")  # cut short
    assert report("sanitizer", str(log)).returncode == 1


def test_summary_table_and_json(tmp_path):
    work, out = tmp_path / "work", tmp_path / "out"
    work.mkdir()
    out.mkdir()
    (work / "stages.tsv").write_text("env\tok\t2\tH100\ndevice\tok\t1\tcuda:0 NVIDIA H100 (sm_90, 81000 MiB)\n"
                                     "cuda\tFAIL\t40\t90 tests, 1 failed, 0 skipped [exit 1]\n")
    (work / "bench-bench_gpu_peers.json").write_text(json.dumps({"results": [{
        "model": "small", "length": 140, "ratios": {"encore_traced/torch_graph": 0.7},
        "runners": {"encore_traced": {"median_ms": 0.35}, "torch_graph": {"median_ms": 0.5}}}]}))
    r = report("summary", str(work), str(out))
    assert r.returncode == 0
    text = (out / "summary.txt").read_text()
    assert text.splitlines()[0] == "encore GPU check: FAILED: cuda"
    assert "small@140: encore_traced 0.350 ms, torch_graph 0.500 ms; traced/torch graph 0.70" in text
    results = json.loads((out / "results.json").read_text())
    assert results["ok"] is False and results["failed_stages"] == ["cuda"]
    assert results["bench"]["bench_gpu_peers"]["results"][0]["model"] == "small"
