#!/usr/bin/env bash
# Set-up for a fresh machine: a venv in .venv with the package and its test extras, and the
# offline Fashion-MNIST from Debian where apt-get is available. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import bnpaper, torch, torchvision, papermill, nbval" 2>/dev/null; then
  .venv/bin/pip install -q --upgrade pip
  # torch/torchvision pinned to the release pair that lies on these machines' disk (see README)
  .venv/bin/pip install -q "torch==2.14.1" "torchvision==0.29.1" || .venv/bin/pip install -q torch torchvision
  .venv/bin/pip install -q -e ".[test]"
fi
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] && command -v apt-get >/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"
  $SUDO apt-get install -y -q dataset-fashion-mnist >/dev/null 2>&1 || {
    $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q dataset-fashion-mnist >/dev/null; }
fi
.venv/bin/python -c "from bnpaper import data; print('[setup] fashion_mnist found in', data.locate('fashion_mnist'))" \
  || echo "[setup] Fashion-MNIST not found: see README (Data)"
# git checks files out in no particular order: give each paired .ipynb its .py's timestamp so
# that jupytext (JupyterLab, papermill) sees the pairs as in sync (the test checks the contents)
for src in notebooks/*.py; do touch -r "$src" "${src%.py}.ipynb"; done
