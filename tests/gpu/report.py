#!/usr/bin/env python3
"""The verdicts and the report of tests/gpu/run.sh (standard library only: it runs under the
lent machine's python3 as well as here).

  report.py junit FILE...   one line for a stage: tests run, failed, skipped; exit 1 when a test
                            failed, or skipped because it found no GPU (on the GPU machine that
                            is a failure: a plugin that did not load must not look green)
  report.py sanitizer LOG   the ERROR SUMMARY of a compute-sanitizer log; exit 1 on errors
  report.py summary WORK OUT  OUT/results.json (stages, test verdicts, benchmark JSON) and
                            OUT/summary.txt (the table run.sh prints last), from WORK/stages.tsv
                            (stage, status, seconds, detail) and WORK/bench-*.json
"""

from __future__ import annotations

import glob
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

# A skip that means the test found no GPU (REQUIRE_CUDA's "no CUDA device", "no CUDA backend in
# this build", test_gpu.py's "torch sees no GPU"); other skips are a test's own business ("a CPU
# fast path", "the CUDA backend is loaded").
NO_GPU = re.compile(r"\bno (CUDA|GPU)\b|sees no GPU", re.IGNORECASE)


def junit_cases(path):
    """(name, outcome, message) per test case of a GoogleTest or pytest JUnit XML file."""
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}.{case.get('name', '')}".strip(".")
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        skipped = case.find("skipped")
        if failure is not None:
            yield name, "failed", failure.get("message", "") or (failure.text or "")
        elif skipped is not None or case.get("result") == "skipped" or case.get("status") == "notrun":
            message = skipped.get("message", "") if skipped is not None else ""
            yield name, "skipped", message or (skipped.text or "" if skipped is not None else "")
        else:
            yield name, "passed", ""


def junit(paths):
    missing = [p for p in paths if not os.path.exists(p)]
    cases = [c for p in paths if os.path.exists(p) for c in junit_cases(p)]
    failed = [c for c in cases if c[1] == "failed"]
    skipped = [c for c in cases if c[1] == "skipped"]
    no_gpu = [c for c in skipped if NO_GPU.search(c[2])]
    line = f"{len(cases)} tests, {len(failed)} failed, {len(skipped)} skipped"
    if no_gpu:
        line += f", {len(no_gpu)} of them for want of a GPU (failures here)"
    if missing:
        line += f"; no results from {', '.join(os.path.basename(p) for p in missing)} (did it finish?)"
    print(line)
    for name, _, message in (failed + no_gpu)[:15]:
        print(f"  {name}: {message.strip().splitlines()[0][:160] if message.strip() else ''}")
    return 1 if failed or no_gpu or missing or not cases else 0


def sanitizer(path):
    text = open(path, errors="replace").read()
    summaries = re.findall(r"ERROR SUMMARY: (\d+) error", text)
    if not summaries:
        print("no ERROR SUMMARY (did not finish?)")
        return 1
    errors = sum(int(s) for s in summaries)
    print(f"{errors} errors")
    for line in re.findall(r"^=========\s+(?:Invalid|Race|Uninitialized|Program hit).*$", text, re.MULTILINE)[:5]:
        print(f"  {line.strip()[:160]}")
    return 1 if errors else 0


def read_stages(work):
    stages = []
    path = os.path.join(work, "stages.tsv")
    if os.path.exists(path):
        for line in open(path):
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 3:
                stages.append({"stage": parts[0], "status": parts[1], "seconds": int(parts[2]),
                               "detail": parts[3] if len(parts) > 3 else ""})
    return stages


def peer_rows(bench):
    rows = []
    for r in bench.get("bench_gpu_peers", {}).get("results", []):
        med = {n: v["median_ms"] for n, v in r["runners"].items()}
        ratio = r["ratios"].get("encore_traced/torch_graph")
        rows.append(f"  {r['model']}@{r['length']}: " + ", ".join(f"{n} {m:.3f} ms" for n, m in med.items()) +
                    (f"; traced/torch graph {ratio:.2f}" if ratio is not None else ""))
    return rows


def summary(work, out):
    stages = read_stages(work)
    bench = {}
    for path in sorted(glob.glob(os.path.join(work, "bench-*.json"))):
        name = os.path.basename(path)[len("bench-"):-len(".json")]
        try:
            bench[name] = json.load(open(path))
        except (OSError, ValueError) as e:
            bench[name] = {"error": str(e)}
    env = {}
    env_path = os.path.join(work, "env.json")
    if os.path.exists(env_path):
        env = json.load(open(env_path))
    failed = [s["stage"] for s in stages if s["status"] not in ("ok", "skipped")]
    results = {"ok": not failed and bool(stages), "failed_stages": failed, "machine": env, "stages": stages,
               "bench": bench}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    lines = [f"encore GPU check: {'PASSED' if results['ok'] else 'FAILED: ' + ', '.join(failed)}"]
    if env:
        lines.append(f"machine: {env.get('gpu', '?')}; driver {env.get('driver', '?')}; {env.get('runtime', '')}")
    lines.append(f"{'stage':<10} {'status':<8} {'s':>4}  detail")
    for s in stages:
        lines.append(f"{s['stage']:<10} {s['status']:<8} {s['seconds']:>4}  {s['detail']}")
    lines += peer_rows(bench)
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write(text)
    print(text, end="")
    return 0


def main(argv):
    if len(argv) >= 2 and argv[0] == "junit":
        return junit(argv[1:])
    if len(argv) == 2 and argv[0] == "sanitizer":
        return sanitizer(argv[1])
    if len(argv) == 3 and argv[0] == "summary":
        return summary(argv[1], argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
