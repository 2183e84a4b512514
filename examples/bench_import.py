"""What `import encore` costs, with the CUDA plugin present and hidden (issue 28: the plugin and
its CUDA libraries used to load at import, ~1 s on a machine without a GPU).

Each round starts a fresh interpreter per variant, in turn, and times the import inside it
(`time.perf_counter` around `import encore`, then what the variant does next); medians over the
rounds. Each variant also lists the CUDA libraries mapped after its import (/proc/self/maps),
which says why it costs what it costs:

    plugin_present      the package as installed
    plugin_hidden       ENCORE_CUDA_PLUGIN names no file: the plugin cannot load
    then_cuda_query     present, then encore.cuda.is_built(), which loads the plugin

    python examples/bench_import.py [--rounds 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

PROGRAM = """
import time
t0 = time.perf_counter()
import encore
{then}
seconds = time.perf_counter() - t0
mapped = sorted({{line.split()[-1].rsplit('/', 1)[-1] for line in open('/proc/self/maps') if '/' in line}})
cuda = [n for n in mapped if n.startswith(('libencore_cuda', 'libcudart', 'libcublas', 'libcudnn'))]
print(repr((seconds, cuda)))
"""

VARIANTS = {
    "plugin_present": ({}, ""),
    "plugin_hidden": ({"ENCORE_CUDA_PLUGIN": "/nonexistent/libencore_cuda.so"}, ""),
    "then_cuda_query": ({}, "encore.cuda.is_built()"),
}


def once(env_extra, then):
    env = dict(os.environ, **env_extra)
    out = subprocess.run([sys.executable, "-c", PROGRAM.format(then=then)], env=env, capture_output=True, text=True,
                         timeout=120)
    if out.returncode != 0:
        raise SystemExit(f"bench_import.py: the import failed:\n{out.stderr}")
    seconds, cuda = eval(out.stdout.strip().splitlines()[-1])
    return seconds, cuda


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    if not os.path.exists("/proc/self/maps"):
        raise SystemExit("bench_import.py: reads /proc/self/maps (Linux only)")
    times = {name: [] for name in VARIANTS}
    mapped = {}
    for _ in range(args.rounds):
        for name, (env_extra, then) in VARIANTS.items():  # in turn: drift on the machine hits all alike
            seconds, cuda = once(env_extra, then)
            times[name].append(seconds)
            mapped[name] = cuda
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    rows = [{"variant": name, "median_s": statistics.median(t), "min_s": min(t), "rounds": len(t),
             "cuda_libraries_mapped": mapped[name]} for name, t in times.items()]
    print(f"{'variant':<18} {'median_s':>9} {'min_s':>7}  CUDA libraries mapped after it")
    for r in rows:
        libraries = ", ".join(r["cuda_libraries_mapped"]) or "-"
        print(f"{r['variant']:<18} {r['median_s']:>9.3f} {r['min_s']:>7.3f}  {libraries}")
    print(f"python {platform.python_version()}, load average {load:.1f}" if load is not None else
          f"python {platform.python_version()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"python": platform.python_version(), "load_average": load, "results": rows}, f, indent=2)


if __name__ == "__main__":
    main()
