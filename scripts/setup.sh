#!/usr/bin/env bash
# Installs the system packages encore builds with, if any is missing (Debian/Ubuntu).
# Idempotent: does nothing when everything is present.
set -euo pipefail

packages=(cmake ninja-build g++ pkg-config ccache libopenblas-openmp-dev libdnnl-dev libgtest-dev
  nlohmann-json3-dev zlib1g-dev python3-dev libopenmpi-dev openmpi-bin)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
