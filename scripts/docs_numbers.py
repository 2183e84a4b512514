#!/usr/bin/env python3
"""Regenerates the numbers in docs/ and the README that come from a run.

    .venv/bin/python scripts/docs_numbers.py [--only p1,p4,...] [--large] [--list]

Runs each puzzle (examples/puzzles/, Python, and the C++ binary from build/examples/ when it
is built) with the arguments its page documents and JSON output, and the README's
compare_modes program, and writes between the page's marker comments

    <!-- docs_numbers:begin ID -->  ...  <!-- docs_numbers:end ID -->

the machine, the date and the load average before and after the run, the command, the table
it printed and its deterministic counts (nodes, traces, setups) as a comment that
tests/python/test_docs_numbers.py checks against today's code. Inline values in the prose,
`<!--v ID KEY FIELD-->35<!--/v-->`, are filled from the same run's JSON rows. The plots are
redrawn when matplotlib is installed (scripts/python_env.sh --plot); without it the script
stops rather than leave a plot older than its table. --large also reruns puzzle 1's larger
models (minutes). Needs encore installed in the interpreter that runs it (.venv).

Times depend on the machine and on what else runs on it: the run line says how loaded it was.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Callable

ROOT = pathlib.Path(__file__).resolve().parents[1]
PUZZLES = ROOT / "examples" / "puzzles"
BUILD = ROOT / "build" / "examples"


@dataclass
class Spec:
    id: str
    page: str
    script: str
    args: list[str]
    quick: list[str]  # arguments that give the same counts in seconds (the test's)
    key: Callable[[dict], str]
    counts: Callable[[dict], dict]
    cpp: str | None = None
    plot: str | None = None
    cpp_args: list[str] = field(default_factory=list)


def _p5_counts(r):
    # A way that traces on every call has as many traces as calls: the count is "every call".
    return {"traces": "every call" if r["traces"] == r["calls"] and r["traces"] > 1 else r["traces"]}


SPECS = [
    Spec("p1", "docs/puzzles/1-eager-vs-graph.md", "p1_eager_vs_graph.py", ["--threads", "1", "--steps", "20"],
         ["--threads", "1", "--steps", "1", "--warmup", "0", "--profile-steps", "1"],
         key=lambda r: r["run"], counts=lambda r: {"nodes": r["nodes"]},
         cpp="puzzle_eager_vs_graph", plot="docs/puzzles/1-eager-vs-graph.png"),
    Spec("p1-large", "docs/puzzles/1-eager-vs-graph.md", "p1_eager_vs_graph.py",
         ["--threads", "1", "--runs", "small@14000,medium@1400,large@1400,bilstm@400", "--steps", "3", "--warmup", "1",
          "--profile-steps", "1"],
         ["--threads", "1", "--runs", "small@14000,medium@1400,large@1400,bilstm@400", "--batch", "1", "--steps", "1",
          "--warmup", "0", "--profile-steps", "1"],
         key=lambda r: r["run"], counts=lambda r: {"nodes": r["nodes"]},
         plot="docs/puzzles/1-eager-vs-graph-large.png"),
    Spec("p2", "docs/puzzles/2-first-call.md", "p2_first_call.py", ["--threads", "2"],
         ["--threads", "1", "--batch", "1", "--channels", "4", "--filters", "4"],
         key=lambda r: r["scenario"],
         counts=lambda r: {f"pass{p}_{k}": r[f"pass{p}_{k}"] for p in (1, 2)
                           for k in ("autotunes", "autotune_hits", "traces")},
         cpp="puzzle_first_call", plot="docs/puzzles/2-first-call.png"),
    Spec("p3", "docs/puzzles/3-cliff.md", "p3_cliff.py", ["--threads", "1"], [],
         key=lambda r: str(r["padding"]), counts=lambda r: {},  # implementations depend on the CPU
         cpp="puzzle_cliff", plot="docs/puzzles/3-cliff.png"),
    Spec("p4", "docs/puzzles/4-layout.md", "p4_layout.py", ["--threads", "2"], ["--threads", "1", "--steps", "1"],
         key=lambda r: r["variant"],
         counts=lambda r: {k: r[k] for k in ("graph_nodes", "copy_nodes", "conversion_nodes")},
         cpp="puzzle_layout", plot="docs/puzzles/4-layout.png"),
    Spec("p5", "docs/puzzles/5-predict.md", "p5_predict.py", ["--threads", "1", "--calls", "200"],
         ["--threads", "1", "--calls", "3", "--warmup", "1", "--profile-steps", "1", "--medium-batch", "2"],
         key=lambda r: f"{r['model']}/{r['way']}", counts=_p5_counts,
         cpp="puzzle_predict", plot="docs/puzzles/5-predict.png"),
]
BY_ID = {s.id: s for s in SPECS}


def machine() -> str:
    cpu = platform.machine()
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores"


def load() -> float:
    return os.getloadavg()[0]


def busy(before: float, after: float) -> str:
    if max(before, after) <= 1.5:
        return ""
    return " (other work on the machine: times inflated, ratios within the run compare)"


def run(cmd: list[str], env: dict | None = None) -> str:
    """Runs a puzzle; its output without the 'wrote PATH' lines."""
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if result.returncode != 0:
        sys.exit(f"docs_numbers: {' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return "\n".join(line for line in result.stdout.splitlines() if not line.startswith("wrote "))


def python_command(spec: Spec, args: list[str], json_path: str, plot: bool) -> list[str]:
    cmd = [sys.executable, str(PUZZLES / spec.script), *args, "--json", json_path]
    if plot and spec.plot:
        cmd += ["--plot", str(ROOT / spec.plot)]
    return cmd


def counts_of(spec: Spec, data: dict) -> dict:
    return {spec.key(r): c for r in data["rows"] if (c := spec.counts(r))}


def run_python(spec: Spec, args: list[str], plot: bool = False) -> tuple[str, dict]:
    """Output and JSON of the Python puzzle with `args`."""
    with tempfile.TemporaryDirectory() as tmp:
        out = run(python_command(spec, args, f"{tmp}/out.json", plot))
        return out, json.loads(pathlib.Path(f"{tmp}/out.json").read_text())


def block(spec_id: str, body: str) -> str:
    return f"<!-- docs_numbers:begin {spec_id} -->\n{body.rstrip()}\n<!-- docs_numbers:end {spec_id} -->"


BLOCK = r"<!-- docs_numbers:begin {id} -->\n(.*?)<!-- docs_numbers:end {id} -->"


def read_block(text: str, spec_id: str) -> str | None:
    m = re.search(BLOCK.format(id=re.escape(spec_id)), text, re.S)
    return m.group(1) if m else None


def documented_counts(text: str, spec_id: str) -> dict:
    body = read_block(text, spec_id)
    m = re.search(r"<!-- counts (\{.*?\}) -->", body or "", re.S)
    return json.loads(m.group(1)) if m else {}


INLINE = re.compile(r"<!--v (\S+) (\S+) (\w+)-->(.*?)<!--/v-->")


def cell(v) -> str:
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"
    return str(v)


def fill_inline(text: str, spec_id: str, data: dict, spec: Spec) -> str:
    rows = {spec.key(r): r for r in data["rows"]}

    def sub(m):
        if m.group(1) != spec_id:
            return m.group(0)
        row = rows.get(m.group(2))
        if row is None or m.group(3) not in row:
            sys.exit(f"docs_numbers: {spec.page}: no value {m.group(2)} {m.group(3)} in {spec_id}'s run")
        return f"<!--v {spec_id} {m.group(2)} {m.group(3)}-->{cell(row[m.group(3)])}<!--/v-->"

    return INLINE.sub(sub, text)


def regenerate(spec: Spec, plot: bool) -> None:
    page = ROOT / spec.page
    text = page.read_text()
    if read_block(text, spec.id) is None:
        sys.exit(f"docs_numbers: {spec.page} has no block {spec.id}")
    print(f"docs_numbers: {spec.id} ...", file=sys.stderr, flush=True)
    before, when = load(), datetime.datetime.now(datetime.timezone.utc)
    out, data = run_python(spec, spec.args, plot)
    after = load()
    shown = " ".join(["python", f"examples/puzzles/{spec.script}", *spec.args])
    body = [f"Run {when:%Y-%m-%d %H:%M} UTC on {machine()}, load average {before:.1f} before and "
            f"{after:.1f} after{busy(before, after)}: "
            f"`{shown}`", "", "```", out, "```"]
    counts = counts_of(spec, data)
    exe = BUILD / spec.cpp if spec.cpp else None
    if exe and exe.exists():
        env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
        with tempfile.TemporaryDirectory() as tmp:
            cpp_out = run([str(exe), *(spec.cpp_args or spec.args), "--json", f"{tmp}/cpp.json"], env)
            cpp_data = json.loads(pathlib.Path(f"{tmp}/cpp.json").read_text())
        try:
            cpp_counts = counts_of(spec, cpp_data)
        except (KeyError, TypeError):  # a C++ puzzle whose JSON is laid out otherwise
            cpp_counts = counts
        if cpp_counts != counts:
            print(f"docs_numbers: {spec.id}: the C++ counts differ from Python's:\n{cpp_counts}\n{counts}",
                  file=sys.stderr)
        body += ["", f"The C++ binary, same run (`OMP_WAIT_POLICY=PASSIVE build/examples/{spec.cpp} "
                     f"{' '.join(spec.cpp_args or spec.args)}`, load average {load():.1f} after):",
                 "", "```", cpp_out, "```"]
    if counts:
        body += [f"<!-- counts {json.dumps(counts, sort_keys=True)} -->"]
    text = re.sub(BLOCK.format(id=re.escape(spec.id)), lambda _: block(spec.id, "\n".join(body)) + "", text,
                  flags=re.S)
    page.write_text(fill_inline(text, spec.id, data, spec))


README_ID = "readme-compare"


def regenerate_readme() -> None:
    """The README's compare_modes sample: its Python program, run as printed there."""
    page = ROOT / "README.md"
    text = page.read_text()
    section = re.search(r"^## Measure your own model\n(.*?)(?=^## )", text, re.S | re.M)
    program = re.search(r"```python\n(.*?)```", section.group(1) if section else "", re.S)
    if not program or read_block(text, README_ID) is None:
        sys.exit(f"docs_numbers: README.md has no Python program or no block {README_ID} in 'Measure your own model'")
    print(f"docs_numbers: {README_ID} ...", file=sys.stderr, flush=True)
    before, when = load(), datetime.datetime.now(datetime.timezone.utc)
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "readme_compare.py"
        path.write_text(program.group(1))
        out = run([sys.executable, str(path)])
    after = load()
    # The reasons' long lines cut, the table kept whole.
    out = "\n".join(line if len(line) <= 200 else line[:197] + "..." for line in out.splitlines())
    body = (f"prints (run {when:%Y-%m-%d %H:%M} UTC on {machine()}, load average {before:.1f} before and {after:.1f} "
            f"after{busy(before, after)}; long lines cut):\n\n```\n{out}\n```")
    page.write_text(re.sub(BLOCK.format(id=README_ID), lambda _: block(README_ID, body), text, flags=re.S))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", help="comma-separated ids (default: every one but p1-large)")
    p.add_argument("--large", action="store_true", help="also p1-large: puzzle 1's larger models (minutes)")
    p.add_argument("--list", action="store_true", help="list the ids and their pages")
    args = p.parse_args()
    if args.list:
        for s in SPECS:
            print(f"{s.id:14} {s.page}  python examples/puzzles/{s.script} {' '.join(s.args)}")
        print(f"{README_ID:14} README.md  the program of 'Measure your own model'")
        return
    ids = args.only.split(",") if args.only else [s.id for s in SPECS if s.id != "p1-large" or args.large] + [
        README_ID]
    unknown = [i for i in ids if i not in BY_ID and i != README_ID]
    if unknown:
        p.error(f"unknown ids {unknown}; --list shows them")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.exit("docs_numbers: matplotlib is missing (scripts/python_env.sh --plot): the plots would be older "
                 "than their tables")
    for i in ids:
        if i == README_ID:
            regenerate_readme()
        else:
            regenerate(BY_ID[i], plot=True)


if __name__ == "__main__":
    main()
