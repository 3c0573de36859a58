# make reproduce-full : the matrix (params/matrix.yaml, full budget) -> one folder per configuration
# make reproduce : the reference run: every notebook, quick budget, Fashion-MNIST (offline)
#                  -> figures/, results/, figures/REPORT.md (the only target that writes them)
# make test      : unit tests (a real-browser JupyterLab test included) + every notebook at the
#                  ci budget (papermill), then re-run under nbval
PY := .venv/bin/python
DATASET ?= fashion_mnist
CI_DIR := runs/ci/$(DATASET)

.PHONY: setup reproduce reproduce-full test lint unit browser notebooks-ci nbval sync bench clean

setup:
	./scripts/setup.sh

reproduce: setup
	$(PY) -m bnpaper reproduce --dataset $(DATASET) --budget quick --reference

# the second reference: every configuration of params/matrix.yaml (the full budget), each into
# its own figures/results folder, then the report with the matrix table
reproduce-full: setup
	$(PY) -m bnpaper matrix --reference

test: setup
	$(MAKE) lint unit browser notebooks-ci nbval

# the package, notebooks, tests and benchmarks formatted and linted at 100 characters
lint:
	.venv/bin/ruff format --check
	.venv/bin/ruff check

unit:
	$(PY) -m pytest tests -q -m "not browser"

# JupyterLab in headless Chromium: Run All twice, and the save round trip (marker `browser`)
browser:
	$(PY) -m pytest tests -q -m browser

notebooks-ci:
	rm -rf $(CI_DIR)
	BNPAPER_STRICT_FIGURES=1 BNPAPER_CACHE=$(CI_DIR)/cache $(PY) -m bnpaper reproduce --dataset $(DATASET) --budget ci --out $(CI_DIR)

# nbval re-executes the papermill copies with a fresh cache: the checked verdict cells double
# as a determinism check
nbval:
	BNPAPER_OUTPUT=$(CI_DIR)/output-nbval BNPAPER_CACHE=$(CI_DIR)/cache-nbval \
	  $(PY) -m pytest --nbval-lax -q -p no:cacheprovider $(CI_DIR)/*.ipynb

sync:
	.venv/bin/jupytext --sync notebooks/*.py

bench: setup
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) -m bnpaper.bench

clean:
	rm -rf runs .cache
