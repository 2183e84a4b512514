#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: the C++ suite (GoogleTest through
# CTest, including the training examples as smoke tests and the installed C++ package), the
# Python suite (pytest in .venv), and the portable wheel (built, installed into a fresh
# environment, trained from). CUDA tests skip with a reason where no GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --preset default -j "$(nproc)"
scripts/python_env.sh
.venv/bin/python -m pytest tests/python -q
.venv/bin/python tests/wheel/check_wheel.py
