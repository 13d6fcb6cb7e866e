#!/usr/bin/env bash
# The reference stack's wheelhouse for the local cluster's nodes, and only for nodes like them (Debian 12, Python 3.11,
# x86_64; other releases need the downloads for their Python and a Horovod build in an image of theirs): torch 2.1.0 and
# torchvision 0.16.0 as PyPI publishes them for Linux (CUDA 12.1 builds, which also run on CPU; with their nvidia-*
# wheels about 2.6 GB), numpy<2 (torch 2.1 is built against NumPy 1.x), and a Horovod 0.28.1 wheel built once
# against that torch (tools/horovod_wheel.sh).
#
#   tools/reference_wheelhouse.sh            prints the wheelhouse's path on its last line
#
# Kept outside the checkout, keyed by the versions: ${DDP_CACHE:-~/.cache/ddp-cluster}/wheelhouse-<key>. A rerun on
# the same machine downloads and builds nothing. pip checks every wheel against the sha256 PyPI's index gives.
# Give the folder to pytorch_env as pytorch_env_wheelhouse (docs/offline.md): the controller serves it to the
# nodes as a package index.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
TORCH=2.1.0
TORCHVISION=0.16.0
PYVER=3.11
DIR="${DDP_CACHE:-$HOME/.cache/ddp-cluster}/wheelhouse-torch$TORCH-tv$TORCHVISION-hvd0.28.1-cp${PYVER/./}"
mkdir -p "$DIR"
if [ ! -e "$DIR/.downloaded" ]; then
  start=$(date +%s)
  "$PYTHON" -m pip download -q --disable-pip-version-check --dest "$DIR" --only-binary=:all: --implementation cp \
    --python-version "$PYVER" --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux1_x86_64 \
    "torch==$TORCH" "torchvision==$TORCHVISION" "numpy<2"
  touch "$DIR/.downloaded"
  echo "reference_wheelhouse: downloaded $(du -sh "$DIR" | cut -f1) in $(( $(date +%s) - start )) s" >&2
fi
PYTHON="$PYTHON" "$ROOT/tools/horovod_wheel.sh" "$DIR" >&2
echo "$DIR"
