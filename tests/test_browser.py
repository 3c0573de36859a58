"""A person's session in JupyterLab, in a real (headless) Chromium: open a notebook, Run All, then
Run All again in the same kernel; every run ends without an error, with its figures drawn inline
and the verdict printed. The notebooks run as copies under runs/browser/ at the ci budget, with
the cache and the outputs in a temporary folder there; the repository's files stay untouched.

Screenshots (the whole notebook after each run): runs/browser/<notebook>-run<k>.png.
Skip these tests with `-m "not browser"`.
"""

import shutil
import tempfile
import time
from pathlib import Path

import pytest

import browser_run as br
from bnpaper import config

ROOT = config.repo_root()
OUT = ROOT / "runs" / "browser"
NOTEBOOKS = [
    "01_forced_memorization",
    "02_gradient_dynamics",
    "03_lira",
    "04_theory",
    "05_mitigation",
]
RUN_TIMEOUT = 900  # seconds per Run All (a ci notebook takes about a minute on 2 cores)
RUNS = 2

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(br.playwright_missing() is not None, reason=str(br.playwright_missing())),
]


@pytest.fixture(scope="module")
def session():
    """One JupyterLab over the repository and one Chromium, for all notebooks here."""
    OUT.mkdir(parents=True, exist_ok=True)
    before = br.git_status(ROOT)
    state = Path(tempfile.mkdtemp(prefix="tmp-", dir=OUT))
    env = {"BNPAPER_CACHE": str(state / "cache"), "BNPAPER_OUTPUT": str(state / "output")}
    try:
        with br.jupyterlab(ROOT, state, env) as lab, br.chromium() as browser:
            yield lab, browser, before
    finally:
        if (state / "jupyterlab.log").exists():
            shutil.copy(state / "jupyterlab.log", OUT / "jupyterlab.log")
        shutil.rmtree(state, ignore_errors=True)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_run_all_twice_in_jupyterlab(session, name):
    lab, browser, git_before = session
    rel = f"runs/browser/{name}.ipynb"
    br.copy_with_budget(ROOT / "notebooks" / f"{name}.ipynb", ROOT / rel, "ci")
    t0 = time.monotonic()
    with br.new_page(browser) as page:
        try:
            br.open_notebook(page, lab, rel)
            print(f"\n[browser] {name}: open, kernel idle after {time.monotonic() - t0:.0f}s")
            for run in range(1, RUNS + 1):
                check_run_all(page, rel, name, run)
        except Exception:
            page.screenshot(path=str(OUT / f"{name}-failure.png"))
            raise
        finally:
            lab.shutdown_kernels(rel)
    assert br.git_status(ROOT) == git_before, "the run changed files of the repository"


def check_run_all(page, rel, name, run):
    seconds = br.run_all(page, rel, timeout=RUN_TIMEOUT)
    shot = OUT / f"{name}-run{run}.png"
    br.screenshot(page, rel, shot)
    nb, seen = br.notebook_json(page, rel), br.dom_summary(page, rel)
    print(
        f"[browser] {name}: Run All #{run} took {seconds:.0f}s; {seen['images']} figure(s) shown; "
        f"screenshot {shot.relative_to(ROOT)}"
    )
    where = f"{name}, Run All #{run} (see {shot.relative_to(ROOT)})"
    assert not br.errors(nb), f"{where}: error output(s):\n" + "\n\n".join(br.errors(nb))
    assert seen["tracebacks"] == 0, f"{where}: a traceback is shown: {seen['stderr']}"
    assert seen["queued"] == 0, f"{where}: cells still queued"
    unexecuted = [
        i
        for i, c in enumerate(nb["cells"])
        if c["cell_type"] == "code" and br.source(c).strip() and c.get("execution_count") is None
    ]
    assert not unexecuted, f"{where}: cells not executed: {unexecuted}"
    assert br.images(nb) >= 1 and seen["images_loaded"] >= 1, f"{where}: no inline figure"
    assert "IProgress not found" not in br.all_text(nb), f"{where}: tqdm fell back to text bars"
    verdict = br.output_text(br.last_code_cell(nb)).strip()
    assert verdict and seen["last_output"].strip(), f"{where}: the verdict cell printed nothing"
