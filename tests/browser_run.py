"""Drive JupyterLab as a person would, for tests/test_browser.py and tests/test_jupyterlab_save.py.

`jupyterlab()` starts a JupyterLab server on a free port of 127.0.0.1 with a random token and its
own (temporary) Jupyter config folder, and shuts it down, kernels included, on the way out.
`chromium()` opens Debian's /usr/bin/chromium headless through playwright (which never downloads
a browser of its own here). The page helpers open a notebook, wait for its kernel, run it from the
menu (Run > Run All Cells), save it with Ctrl+S and read back what the page holds.

The server runs with `LabApp.expose_app_in_browser` (the switch JupyterLab's own UI tests use) so
that the page's `window.jupyterapp` tells the kernel's state and hands over the notebook model
(`nbformat` JSON, outputs included); the clicks and keys go through the page like a person's.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1400, "height": 1000}
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

# JupyterLab settings for the test server only: no autosave (the page changes nothing on disk
# unless a test saves), no news or update checks (no network here; no toast over the screenshot)
TEST_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    "@jupyterlab/apputils-extension/notification": {"checkForUpdates": False, "fetchNews": "false"},
}


def playwright_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing (scripts/setup.sh installs Debian's chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is missing (pip install -e '.[test]')"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def jupyter_executable() -> list[str]:
    """This interpreter's `jupyter` (the project's venv when pytest runs from it)."""
    exe = Path(sys.executable).with_name("jupyter")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "jupyter"]


@dataclass
class Lab:
    root: Path
    port: int
    token: str
    log: Path
    proc: subprocess.Popen

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, relpath: str, workspace: str | None = None) -> str:
        """The page that opens `relpath`; in a workspace of its own, when named, so that no
        notebook opened earlier comes back with it."""
        ws = f"workspaces/{workspace}/" if workspace else ""
        return f"{self.base}/lab/{ws}tree/{relpath}?token={self.token}"

    def api(self, method: str, path: str, body: Any = None, timeout: float = 60) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"{self.base}{path}",
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=timeout) as r:
            text = r.read().decode()
        return json.loads(text) if text else None

    def shutdown_kernels(self, relpath: str) -> None:
        """End the sessions (and so the kernels) of the notebook at `relpath`."""
        for s in self.api("GET", "/api/sessions"):
            if s.get("path") == relpath:
                self.api("DELETE", f"/api/sessions/{s['id']}")

    def log_tail(self, n: int = 40) -> str:
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return "\n".join(lines[-n:])


@contextlib.contextmanager
def jupyterlab(
    root: Path, state: Path, env: dict[str, str] | None = None, start_timeout: float = 120
) -> Iterator[Lab]:
    """A JupyterLab server over `root`; its config, settings, workspaces and log live in `state`.

    `env` is added to this process's environment (kernels inherit it).
    """
    state.mkdir(parents=True, exist_ok=True)
    config_dir = state / "jupyter-config"  # keeps ~/.jupyter (passwords, user settings) out
    for plugin, values in TEST_SETTINGS.items():
        f = config_dir / "lab" / "user-settings" / f"{plugin}.jupyterlab-settings"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(values))
    port, token = free_port(), secrets.token_hex(16)
    full_env = {**os.environ, **(env or {}), "JUPYTER_CONFIG_DIR": str(config_dir)}
    cmd = [
        *jupyter_executable(),
        "lab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.expose_app_in_browser=True",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # CI and these machines run as root
    log = state / "jupyterlab.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=full_env,
            cwd=root,
            start_new_session=True,
        )
    lab = Lab(root, port, token, log, proc)
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {proc.returncode}:\n{lab.log_tail()}")
            try:
                lab.api("GET", "/api/status", timeout=5)
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"JupyterLab not up after {start_timeout:.0f}s:\n{lab.log_tail()}"
                    )
                time.sleep(0.5)
        yield lab
    finally:
        _stop(lab)


def _stop(lab: Lab) -> None:
    """Shut the server down (it shuts its kernels down), then make sure: its process group only."""
    proc = lab.proc
    if proc.poll() is None:
        with contextlib.suppress(Exception):
            lab.api("POST", "/api/shutdown", timeout=10)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # a kernel left behind by a crash (group = this server)


@contextlib.contextmanager
def chromium():
    """A headless Chromium with a fresh temporary profile (playwright's default)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def new_page(browser, viewport: dict[str, int] = VIEWPORT):
    """A page in a context of its own (no cookies or storage shared with other pages)."""
    context = browser.new_context(viewport=viewport)
    try:
        yield context.new_page()
    finally:
        context.close()


# ---------------------------------------------------------------- notebooks
def copy_with_budget(src: Path, dst: Path, budget: str) -> None:
    """Copy a notebook, its parameters cell's `budget = "..."` line set to `budget`."""
    nb = json.loads(src.read_text())
    tagged = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, f"{src.name}: expected one cell tagged parameters, found {len(tagged)}"
    cell = tagged[0]
    text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    new, n = re.subn(r'^budget = "[a-z]+"', f'budget = "{budget}"', text, flags=re.M)
    assert n == 1, f'{src.name}: the parameters cell has no line `budget = "..."`'
    cell["source"] = new.splitlines(keepends=True)
    dst.parent.mkdir(parents=True, exist_ok=True)
    # a paired text file left by an earlier save would be read instead of this copy (jupytext)
    for stale in dst.parent.glob(dst.stem + ".*"):
        if stale.suffix != ".png":
            stale.unlink()
    dst.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


_PANEL = """(path) => {
  const app = window.jupyterapp;
  if (!app || !app.shell) return null;
  const w = app.shell.currentWidget;
  return w && w.context && w.context.path === path && w.content && w.content.model ? w : null;
}"""

_KERNEL_IDLE = f"""(path) => {{
  const w = ({_PANEL})(path);
  if (!w || !w.context.isReady || !w.sessionContext.isReady) return false;
  const k = w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.status === 'idle';
}}"""

_RUNNING = f"""(path) => {{
  const w = ({_PANEL})(path);
  const prompts = [...w.node.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
  const k = w.sessionContext.session && w.sessionContext.session.kernel;
  return prompts.some(p => p.textContent.includes('*')) || (!!k && k.status !== 'idle');
}}"""


def _raise_on_dialog(page) -> None:
    dialog = page.locator(".jp-Dialog")
    if dialog.count():
        raise AssertionError(f"JupyterLab shows a dialog: {dialog.first.inner_text()!r}")


def _wait(page, predicate: str, arg: Any, timeout: float, what: str, stable: float = 0.0) -> None:
    """Poll a page predicate until it holds (for `stable` seconds), failing on any dialog."""
    deadline = time.monotonic() + timeout
    since = None
    while True:
        _raise_on_dialog(page)
        if page.evaluate(predicate, arg):
            since = since or time.monotonic()
            if time.monotonic() - since >= stable:
                return
        else:
            since = None
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.5)


def open_notebook(page, lab: Lab, relpath: str, timeout: float = 180) -> None:
    """Open `relpath` in JupyterLab (in a workspace of its own) and wait until its kernel has
    started and is idle."""
    page.goto(lab.url(relpath, workspace=re.sub(r"[^A-Za-z0-9]+", "-", relpath)))
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=timeout * 1000)
    _wait(page, _KERNEL_IDLE, relpath, timeout, f"the kernel of {relpath} to be idle", stable=1.0)
    # the panel writes the kernel's language_info into the notebook once the kernel's info reply
    # is in: let that land before anything reads or saves the notebook
    page.evaluate(
        f"""async (path) => {{
      await ({_PANEL})(path).sessionContext.session.kernel.info;
      await new Promise(r => setTimeout(r, 500));
    }}""",
        relpath,
    )


def _click_run_all(page) -> bool:
    """Open the Run menu and click Run All Cells; False (menu closed again) when it is disabled."""
    page.locator(".jp-NotebookPanel .jp-Notebook").first.click(position={"x": 5, "y": 5})
    page.locator(".lm-MenuBar-item", has_text=re.compile(r"^\s*Run\s*$")).click()
    item = page.locator(
        "#jp-mainmenu-run li.lm-Menu-item",
        has=page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")),
    )
    item.wait_for()
    if "lm-mod-disabled" in (item.get_attribute("class") or ""):
        page.keyboard.press("Escape")
        return False
    item.click()
    return True


def run_all(page, relpath: str, timeout: float = 600, tries: int = 3) -> float:
    """Run > Run All Cells, clicked in the menu bar; wait until no cell is queued or running and the
    kernel is idle. Returns the seconds it took.

    A click that starts nothing (the menu item still disabled, or the click lost while the page
    settles) is tried again: the cells show `[*]` as soon as they are queued, so nothing ran."""
    t0 = time.monotonic()
    for attempt in range(1, tries + 1):
        if _click_run_all(page):
            try:
                _wait(page, _RUNNING, relpath, 15, "Run All to start")
                break
            except AssertionError:
                pass
        if attempt == tries:
            raise AssertionError(f"Run All did not start {relpath} ({tries} clicks)")
        print(f"[browser] Run All #{attempt} started nothing in {relpath}; clicking again")
        page.wait_for_timeout(2000)
    _wait(
        page,
        f"(path) => !({_RUNNING})(path)",
        relpath,
        timeout,
        f"Run All of {relpath} to finish",
        stable=2.0,
    )
    return time.monotonic() - t0


def save(page, lab: Lab, relpath: str, timeout: float = 60) -> None:
    """Ctrl+S in the notebook, then wait until the server holds the saved file."""
    before = lab.api("GET", f"/api/contents/{relpath}?content=0")["last_modified"]
    page.locator(".jp-NotebookPanel .jp-Notebook").first.click(position={"x": 5, "y": 5})
    page.keyboard.press("Control+s")
    _wait(
        page,
        f"(path) => {{ const w = ({_PANEL})(path); return !!w && !w.context.model.dirty; }}",
        relpath,
        timeout,
        f"{relpath} to be saved",
    )
    deadline = time.monotonic() + timeout
    while lab.api("GET", f"/api/contents/{relpath}?content=0")["last_modified"] == before:
        if time.monotonic() > deadline:
            raise AssertionError(f"Ctrl+S did not save {relpath}")
        time.sleep(0.5)


def notebook_json(page, relpath: str) -> dict:
    """The notebook as the page holds it (nbformat JSON, outputs included)."""
    return page.evaluate(f"(path) => ({_PANEL})(path).content.model.toJSON()", relpath)


def dom_summary(page, relpath: str) -> dict:
    """What a person sees: rendered images, visible tracebacks, queued cells, the last code cell's
    output text."""
    return page.evaluate(
        f"""(path) => {{
      const w = ({_PANEL})(path);
      const outs = [...w.node.querySelectorAll('.jp-OutputArea-output')];
      const imgs = outs.flatMap(o => [...o.querySelectorAll('img')]);
      const stderr = outs.filter(o => o.dataset.mimeType === 'application/vnd.jupyter.stderr')
                         .map(o => o.innerText);
      const code = [...w.node.querySelectorAll('.jp-CodeCell')];
      const last = code.length ? code[code.length - 1] : null;
      return {{
        images: imgs.length,
        images_loaded: imgs.filter(i => i.complete && i.naturalWidth > 0).length,
        stderr: stderr,
        tracebacks: stderr.filter(t => t.includes('Traceback')).length,
        queued: [...w.node.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
                  .filter(p => p.textContent.includes('*')).length,
        last_output: last ? [...last.querySelectorAll('.jp-OutputArea-output')]
                              .map(o => o.innerText).join('\\n') : '',
      }};
    }}""",
        relpath,
    )


def screenshot(page, relpath: str, path: Path, max_height: int = 30000) -> None:
    """The whole notebook, top to bottom, in one PNG: the viewport grows to the notebook's height
    for the shot (JupyterLab scrolls inside its own panel, so a plain full-page shot would show one
    screen). A notebook taller than `max_height` pixels is cut there."""
    scroller = f"""(path) => {{
      const nb = ({_PANEL})(path).content.node;
      return nb.querySelector('.jp-WindowedPanel-outer') || nb;
    }}"""
    height = page.evaluate(
        f"""(path) => {{
      const s = ({scroller})(path);
      return s.scrollHeight + (window.innerHeight - s.clientHeight);
    }}""",
        relpath,
    )
    old = page.viewport_size
    page.set_viewport_size(
        {"width": old["width"], "height": max(old["height"], min(height, max_height))}
    )
    try:
        page.evaluate(f"(path) => ({scroller})(path).scrollTo(0, 0)", relpath)
        page.wait_for_timeout(2000)  # let the taller panel lay out and draw its cells
        path.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(path), full_page=True)
    finally:
        page.set_viewport_size(old)


# ---------------------------------------------------------------- reading outputs
def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def source(cell: dict) -> str:
    return _text(cell.get("source"))


def errors(nb: dict) -> list[str]:
    """One line per error output: cell number, exception and the traceback's last lines."""
    found = []
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                tb = ANSI.sub("", "\n".join(out.get("traceback", [])))
                found.append(
                    f"cell {i}: {out.get('ename')}: {out.get('evalue')}\n"
                    + "\n".join(tb.splitlines()[-12:])
                )
    return found


def images(nb: dict) -> int:
    return sum(
        1
        for c in nb["cells"]
        for o in c.get("outputs", [])
        if any(k.startswith("image/") for k in o.get("data", {}))
    )


def output_text(cell: dict, streams: tuple[str, ...] = ("stdout",)) -> str:
    """A code cell's text output: the named streams and text/plain results."""
    parts = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream" and o.get("name") in streams:
            parts.append(_text(o.get("text")))
        elif (
            o.get("output_type") in ("execute_result", "display_data")
            and "text/plain" in o.get("data", {})
            and not any(k.startswith("image/") or "widget" in k for k in o["data"])
        ):
            parts.append(_text(o["data"]["text/plain"]))
    return "".join(parts)


def all_text(nb: dict) -> str:
    return "\n".join(
        output_text(c, ("stdout", "stderr")) for c in nb["cells"] if c["cell_type"] == "code"
    )


def last_code_cell(nb: dict) -> dict:
    return [c for c in nb["cells"] if c["cell_type"] == "code"][-1]


def git_status(root: Path) -> str | None:
    """`git status --porcelain` of `root`, or None where it is no git checkout."""
    if shutil.which("git") is None or not (root / ".git").exists():
        return None
    return subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
