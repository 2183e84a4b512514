#!/usr/bin/env python3
"""Data-parallel training of a benchmark Conv1D model on 1, 2 and 4 ranks (the C++ twin is
examples/data_parallel.cpp): time per step, samples per second, scaling efficiency, and what the
step communicates. The global batch is the same for every rank count (strong scaling).

  python examples/data_parallel.py [--model small] [--ranks 1,2,4] [--threads 1] [--batch 32]
                                   [--steps 10] [--length 1000] [--bucket-kib 1024]
      run alone: launches itself under mpirun once per rank count and prints the table
  mpirun -np 2 python examples/data_parallel.py ...
      one configuration; rank 0 prints one result line
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).parent / "puzzles"))
import encore  # noqa: E402
import encore.distributed as dist  # noqa: E402
from benchmark_models import build  # noqa: E402
from encore import nn  # noqa: E402

FIELDS = ["ranks", "threads", "step_ms", "samples_s", "comm_calls", "comm_kib", "comm_ms", "hidden_pct"]


def worker(args):
    world = dist.init()
    encore.set_num_threads(args.threads)
    if args.batch % world.size:
        sys.exit("data_parallel.py: --batch must be a multiple of the rank count")
    rows = args.batch // world.size
    encore.manual_seed(1)
    model, adam = build(args.model, (rows, args.length, 30))
    dist.broadcast_parameters(model)
    opt = dist.DistributedOptimizer(adam, bucket_bytes=args.bucket_kib * 1024)
    rng = np.random.default_rng(7)  # every rank draws the global batch, keeps its rows
    x = rng.standard_normal((args.batch, args.length, 30)).astype(np.float32)[world.rank * rows:][:rows]
    y = rng.integers(0, 2, (args.batch, 1)).astype(np.float32)[world.rank * rows:][:rows]

    @encore.trace
    def step(xb, yb):
        opt.zero_grad()
        loss = nn.binary_crossentropy(yb, model(xb))
        loss.backward()
        opt.step()
        return loss

    for _ in range(3):
        step(x, y)
    times, totals = [], {"collectives": 0, "collective_bytes": 0, "comm_ns": 0, "comm_wait_ns": 0}
    for _ in range(args.steps):
        dist.barrier()
        before = encore.ledger.as_dict()
        t = time.perf_counter()
        step(x, y)
        times.append((time.perf_counter() - t) * 1e3)
        after = encore.ledger.as_dict()
        for k in totals:
            totals[k] += after[k] - before[k]
    slowest = dist.all_gather(encore.tensor(np.array([statistics.median(times)]))).numpy().max()
    n = args.steps
    comm_ms, wait_ms = totals["comm_ns"] / 1e6 / n, totals["comm_wait_ns"] / 1e6 / n
    if world.rank == 0:
        hidden = 100 * max(0.0, comm_ms - wait_ms) / comm_ms if comm_ms > 0 else 0.0
        values = [world.size, args.threads, slowest, args.batch / (slowest / 1e3), totals["collectives"] / n,
                  totals["collective_bytes"] / 1024 / n, comm_ms, hidden]
        print("result " + " ".join(f"{k}={v}" for k, v in zip(FIELDS, values)), flush=True)


def driver(args, forwarded):
    mpirun = shutil.which("mpirun")
    if mpirun is None or dist.unavailable_reason():
        sys.exit(f"data_parallel.py: MPI is unavailable: {dist.unavailable_reason() or 'no mpirun'}")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    results = []
    for threads in map(int, args.threads_list.split(",")):
        for ranks in map(int, args.ranks.split(",")):
            cmd = [mpirun, "--oversubscribe", "--bind-to", "none", "-np", str(ranks), sys.executable, __file__,
                   "--worker", "--threads", str(threads), *forwarded]
            out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            line = [l for l in out.stdout.splitlines() if l.startswith("result ")]
            if out.returncode or not line:
                sys.exit(f"data_parallel.py: {' '.join(cmd)} failed:\n{out.stdout}")
            results.append({k: float(v) for k, v in (f.split("=") for f in line[-1].split()[1:])})
    print(f"{'ranks':<6} {'threads':<8} {'step_ms':>10} {'samples/s':>10} {'efficiency':>11} {'allreds':>8} "
          f"{'KiB/step':>10} {'comm_ms':>9} {'hidden':>7}")
    for r in results:
        base = next(b["step_ms"] for b in results if b["ranks"] == 1 and b["threads"] == r["threads"])
        print(f"{int(r['ranks']):<6} {int(r['threads']):<8} {r['step_ms']:>10.2f} {r['samples_s']:>10.1f} "
              f"{100 * base / (r['ranks'] * r['step_ms']):>10.0f}% {r['comm_calls']:>8.1f} {r['comm_kib']:>10.1f} "
              f"{r['comm_ms']:>9.2f} {r['hidden_pct']:>6.0f}%")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", default="small", choices=["small", "medium"])
    p.add_argument("--ranks", default="1,2,4")
    p.add_argument("--threads", dest="threads_list", default="1", help="threads per rank, a list (1,2)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--length", type=int, default=1000)
    p.add_argument("--bucket-kib", type=int, default=1024)
    args = p.parse_args()
    if args.worker or dist.launched():
        args.threads = int(args.threads_list.split(",")[0])
        return worker(args)
    forwarded = [f"--{k}={getattr(args, k.replace('-', '_'))}" for k in
                 ("model", "batch", "steps", "length", "bucket-kib")]
    driver(args, forwarded)


if __name__ == "__main__":
    main()
