#!/usr/bin/env bash
# The main job: installs what is missing, builds, and compares eager, traced and retraced
# training on the GPU if there is one, else the CPU. Arguments go to compare_modes
# (e.g. --steps 50 --json results.json --lstm). With --python, runs the Python version.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ "${1:-}" = "--python" ]; then
  shift
  scripts/python_env.sh
  exec .venv/bin/python examples/compare_modes.py "$@"
fi
scripts/build.sh
exec build/examples/compare_modes "$@"
