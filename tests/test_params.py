"""Parameters: one copy of each default, and values refused when they are resolved."""

import pytest

from bnpaper import config, params, reproduce
from bnpaper.config import ConfigError


def _root_with(tmp_path, monkeypatch, files: dict[str, str]) -> None:
    """A repository root with the real notebook sources and params files, some replaced."""
    for folder in ("notebooks", "params"):
        (tmp_path / folder).mkdir()
        for src in (config.repo_root() / folder).glob("*.py" if folder == "notebooks" else "*"):
            (tmp_path / folder / src.name).write_text(src.read_text())
    for name, text in files.items():
        (tmp_path / "params" / f"{name}.yaml").write_text(text)
    monkeypatch.setenv("BNPAPER_ROOT", str(tmp_path))


def test_quick_budget_repeats_no_default():
    """The parameters cells are the quick budget: params/quick.yaml holds only what differs."""
    quick = params.read_params_file(params.params_file("quick"))
    for section, values in quick.items():
        for nb in config.NOTEBOOKS if section == "all" else [section]:
            d = params.defaults(nb)
            same = sorted(k for k, v in values.items() if k in d and d[k] == v)
            assert not same, f"params/quick.yaml repeats {nb}'s defaults {same}"


def test_defaults_are_parsed_once_and_each_caller_gets_its_own_copy():
    params.defaults("03_lira")
    before = params._parameters_cell.cache_info()
    first = params.defaults("03_lira")
    first["norms"].append("gn")  # a caller changing its copy changes no one else's
    assert params.defaults("03_lira")["norms"] != first["norms"]
    after = params._parameters_cell.cache_info()
    assert after.hits == before.hits + 2 and after.misses == before.misses


@pytest.mark.parametrize("nb", config.NOTEBOOKS)
def test_device_cuda_without_a_gpu_is_refused_when_parameters_are_resolved(nb, monkeypatch):
    monkeypatch.setattr(config.torch.cuda, "is_available", lambda: False)
    with pytest.raises(
        ConfigError,
        match=r"^device='cuda' but torch sees no GPU on this machine .*"
        r"allowed here: 'auto' \(the CPU when there is no GPU\) or 'cpu'$",
    ):
        params.resolve(nb, {"device": "cuda"})
    assert params.resolve(nb, {"device": "auto"}).values["device"] == "auto"
    monkeypatch.setattr(config.torch.cuda, "is_available", lambda: True)
    assert params.resolve(nb, {"device": "cuda"}).values["device"] == "cuda"


def test_the_runner_refuses_cuda_without_a_gpu_before_any_notebook_starts(monkeypatch):
    monkeypatch.setattr(config.torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=r"device='cuda' but torch sees no GPU"):
        reproduce.plan("fashion_mnist", "ci", ["01", "03"], {"device": "cuda"})


def test_a_budget_whose_size_sweep_spans_less_than_8x_is_refused(tmp_path, monkeypatch):
    _root_with(tmp_path, monkeypatch, {"ci": "03_lira:\n  size_sweep: [64, 128, 256, 500]\n"})
    with pytest.raises(ConfigError, match=r"size_sweep=\[64, 128, 256, 500\] .*spans only 7.81x"):
        params.resolve("03_lira", {"budget": "ci"})
    assert params.resolve("03_lira", {"size_sweep": []}).values["size_sweep"] == []


@pytest.mark.parametrize("nb", config.NOTEBOOKS)
def test_papermill_reads_every_default_of_the_parameters_cell(nb):
    """papermill's own inspection (used for `--help-notebook` and its unknown-parameter warning)
    skips a line with a second '=' (say, '>=' in a comment): every default the package reads must
    also be one papermill reads, so `-p name value` never warns that `name` is unknown."""
    import nbformat
    from papermill.translators import PythonTranslator

    path = config.repo_root() / "notebooks" / f"{nb}.py"
    text = path.read_text()
    start = text.find('tags=["parameters"]')
    body = text[text.index("\n", start) + 1 :]
    cell = body[: body.find("\n# %%")]
    seen = {p.name for p in PythonTranslator.inspect(nbformat.v4.new_code_cell(cell))}
    assert seen == set(params.defaults(nb))
