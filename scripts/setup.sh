#!/usr/bin/env bash
# Set-up for a fresh machine: a venv in .venv with the package and its test extras, and, where
# apt-get is available, the offline Fashion-MNIST and the Chromium that tests/test_browser.py
# drives, both from Debian. Safe to re-run, and quick when everything is there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import bnpaper, torch, torchvision, papermill, nbval, ipywidgets, playwright" 2>/dev/null \
   || ! .venv/bin/ruff --version 2>/dev/null | grep -q "0.17.6"; then
  .venv/bin/pip install -q --upgrade pip
  # torch/torchvision pinned to the release pair that lies on these machines' disk (see README)
  .venv/bin/pip install -q "torch==2.14.1" "torchvision==0.29.1" || .venv/bin/pip install -q torch torchvision
  .venv/bin/pip install -q -e ".[test]"
fi
SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"
apt_install() {  # Debian packages, quietly; refresh the package lists only when the first try fails
  $SUDO apt-get install -y -q "$@" >/dev/null 2>&1 || {
    $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q "$@" >/dev/null; }
}
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] && command -v apt-get >/dev/null; then
  apt_install dataset-fashion-mnist
fi
# the real-browser test (playwright drives this Chromium; it never downloads a browser of its own)
if { [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; } && command -v apt-get >/dev/null; then
  apt_install chromium chromium-driver || echo "[setup] chromium not installed: tests/test_browser.py will skip"
fi
# JupyterLab opens the notebooks' .py sources (py:percent) as notebooks, through jupytext's
# extension: a settings override inside the venv, merged into whatever the file already holds
.venv/bin/python - <<'PY'
import json, sys
from pathlib import Path
path = Path(sys.prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
settings = json.loads(path.read_text()) if path.exists() else {}
viewers = settings.setdefault("@jupyterlab/docmanager-extension:plugin", {}).setdefault("defaultViewers", {})
if viewers.get("python") != "Jupytext Notebook":
    viewers["python"] = "Jupytext Notebook"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2) + "\n")
PY
.venv/bin/python -c "from bnpaper import sources; print('[setup] fashion_mnist found in', sources.locate('fashion_mnist'))" \
  || echo "[setup] Fashion-MNIST not found: see docs/data.md"
# git checks files out in no particular order: give each paired .ipynb its .py's timestamp so
# that jupytext (JupyterLab, papermill) sees the pairs as in sync (the test checks the contents)
for src in notebooks/*.py; do touch -r "$src" "${src%.py}.ipynb"; done
