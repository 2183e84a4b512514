#!/usr/bin/env python3
"""Runs the data-parallel tests under mpirun (as CTest tests).

  run_mpi.py --mpirun M --program P suite --np N   the suite on N ranks (--oversubscribe)
  run_mpi.py --mpirun M --program P failures       a rank that times out, aborts or dies: the
                                                    others fail with a clear error, never hang

Runs as root too (CI does): mpirun refuses root unless OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM) are set.
Each rank gets one thread (the machine may have fewer cores than ranks), and a collective
timeout of 60 s, so a failing assertion on one rank ends the others instead of hanging them.
"""

import argparse
import os
import subprocess
import sys

GUARD_S = 240  # no scenario may hang: a run still going after this is a failure


def run(args, np, gtest_filter, extra_env=None):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1",
               ENCORE_DIST_TIMEOUT="60", OMPI_MCA_rmaps_base_oversubscribe="1")
    env.update(extra_env or {})
    cmd = [args.mpirun, "--oversubscribe", "-np", str(np), args.program, f"--gtest_filter={gtest_filter}"]
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=GUARD_S)
    except subprocess.TimeoutExpired as e:
        print(e.stdout or "")
        print(f"FAILED: {' '.join(cmd)} still ran after {GUARD_S} s (a hang)")
        sys.exit(1)
    return p.returncode, p.stdout


def suite(args):
    rc, out = run(args, args.np, "-Scenario.*")
    print(out)
    passed = out.count("[  PASSED  ]")
    if rc != 0 or passed != args.np:
        print(f"FAILED: exit status {rc}, {passed} of {args.np} ranks passed")
        return 1
    return 0


def failures(args):
    failed = []
    scenarios = [
        # (test, timeout, what rank 0 must print)
        ("Scenario.PeerSkipsACollective", "3", "did not finish within 3 s"),
        ("Scenario.PeerAborts", "30", None),
        ("Scenario.PeerExits", "30", None),
    ]
    for test, timeout, needle in scenarios:
        rc, out = run(args, 2, test, {"ENCORE_DIST_SCENARIO": "1", "ENCORE_DIST_TIMEOUT": timeout})
        print(f"---- {test}: exit status {rc}\n{out}")
        if needle and needle not in out:
            failed.append(f"{test}: rank 0 did not report '{needle}'")
        if rc == 0 and needle is None:
            failed.append(f"{test}: the job succeeded although a rank failed")
    for f in failed:
        print("FAILED:", f)
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mpirun", required=True)
    parser.add_argument("--program", required=True)
    parser.add_argument("mode", choices=["suite", "failures"])
    parser.add_argument("--np", type=int, default=2)
    args = parser.parse_args()
    return suite(args) if args.mode == "suite" else failures(args)


if __name__ == "__main__":
    sys.exit(main())
