import pytest
import yaml

from bnpaper import config, reproduce
from bnpaper.config import ConfigError

NB = "01_forced_memorization"


def test_notebook_defaults_are_read_from_the_parameters_cell():
    d = config.notebook_defaults(NB)
    assert d["dataset"] == "fashion_mnist" and d["budget"] == "quick" and "bn" in d["norms"]


def test_params_merge_dataset_then_budget_then_cli():
    p = reproduce.notebook_params(NB, "fashion_mnist", "ci", {"epochs": 7})
    ci = yaml.safe_load((config.repo_root() / "params" / "ci.yaml").read_text())[NB]
    assert p["n_train"] == ci["n_train"] and p["epochs"] == 7
    assert p["dataset"] == "fashion_mnist" and p["budget"] == "ci"


@pytest.mark.parametrize("dataset,budget,over,match", [
    ("cifar11", "ci", {}, r"dataset='cifar11' is not allowed"),
    ("fashion_mnist", "huge", {}, r"budget='huge' is not allowed"),
    ("fashion_mnist", "ci", {"bogus": 1}, r"unknown parameter 'bogus'"),
    ("fashion_mnist", "ci", {"dataset": "mnist"}, r"set by --dataset"),
])
def test_bad_runner_input_is_one_clear_error(dataset, budget, over, match):
    with pytest.raises(ConfigError, match=match):
        reproduce.notebook_params(NB, dataset, budget, over)


def test_unknown_key_in_a_params_file_is_an_error(tmp_path, monkeypatch):
    (tmp_path / "params").mkdir()
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / f"{NB}.py").write_text(
        config.notebook_source(NB).read_text())
    (tmp_path / "params" / "fashion_mnist.yaml").write_text("all: {arch: lenet}\n")
    (tmp_path / "params" / "ci.yaml").write_text(f"{NB}:\n  epoch: 3\n")
    monkeypatch.setenv("BNPAPER_ROOT", str(tmp_path))
    with pytest.raises(ConfigError, match=r"ci.yaml: unknown parameter\(s\) \['epoch'\]"):
        reproduce.notebook_params(NB, "fashion_mnist", "ci")


def test_every_params_file_parses_and_names_known_keys():
    for path in sorted((config.repo_root() / "params").glob("*.yaml")):
        doc = reproduce._read_yaml(path)
        for section, body in doc.items():
            if section == "all":
                continue
            if config.notebook_source(section).exists():
                config.check_keys(section, body)


def test_check_params_rejects_injected_unknown_names():
    ns = dict(config.notebook_defaults(NB))
    ns["noise_fraction"] = 0.2
    with pytest.raises(ConfigError, match=r"unknown parameter\(s\) \['noise_fraction'\]"):
        config.check_params(ns, NB)
    del ns["noise_fraction"]
    assert config.check_params(ns, NB)["epochs"] == ns["epochs"]


def test_only_accepts_numbers_and_names():
    assert reproduce.resolve_notebooks(["01"]) == [NB]
    with pytest.raises(ConfigError, match=r"--only '09'"):
        reproduce.resolve_notebooks(["09"])


@pytest.mark.parametrize("name,value,kw,match", [
    ("noise_frac", 1.5, dict(lo=0, hi=1, hi_open=True), r"noise_frac=1.5 is out of range"),
    ("epochs", 2.5, dict(lo=1, integer=True), r"epochs=2.5 must be an integer"),
    ("lr", True, dict(lo=0), r"lr=True must be a number"),
])
def test_check_number_messages_name_key_value_and_range(name, value, kw, match):
    with pytest.raises(ConfigError, match=match):
        config.check_number(name, value, **kw)


@pytest.mark.parametrize("notebook", [nb for nb in config.NOTEBOOKS if nb != "04_theory"])
def test_check_common_accepts_every_notebooks_defaults(notebook):
    defaults = config.notebook_defaults(notebook)
    assert config.check_common(defaults) is defaults


@pytest.mark.parametrize("over, match", [
    ({"dataset": "cifar11"}, r"dataset='cifar11' is not allowed; choose one of \['mnist'"),
    ({"noise_frac": 1.5}, r"noise_frac=1.5 is out of range; allowed: a number in \(0.0, 1.0\)"),
    ({"norms": ["bn", "gn"]}, r"norms=\['bn', 'gn'\] must include 'bn' and 'none'"),
    ({"batch_size": 9000}, r"batch_size=9000 is out of range; allowed: an integer in \[2, 8000\]"),
    ({"seeds": [0, 0]}, r"seeds=\[0, 0\] must not repeat values"),
])
def test_check_common_names_the_bad_parameter(over, match):
    params = {**config.notebook_defaults("01_forced_memorization"), **over}
    with pytest.raises(config.ConfigError, match=match):
        config.check_common(params)


def test_quick_budget_is_every_notebooks_default():
    quick = yaml.safe_load((config.repo_root() / "params" / "quick.yaml").read_text())
    for nb, section in quick.items():
        defaults = config.notebook_defaults(nb)
        assert {k: defaults[k] for k in section} == section, nb


def test_config_errors_render_in_notebooks_as_one_line_without_traceback():
    from bnpaper.data import DatasetNotFoundError
    for err in (ConfigError("noise_frac=1.5 is out of range"), DatasetNotFoundError("dataset='cifar10' was not found")):
        assert err._render_traceback_() == [f"{type(err).__name__}: {err}"]
