#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: the C++ suite (GoogleTest through
# CTest, including the training examples as smoke tests) and the Python suite (pytest in
# .venv). CUDA tests skip with a reason where no GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --preset default -j "$(nproc)"
scripts/python_env.sh
.venv/bin/python -m pytest tests/python -q
