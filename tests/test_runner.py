"""Parameters by every route (declarations, params files, the runner's plan, the notebook's
start()), and the runner's own behaviour: staged reference outputs, progress, a quiet kernel."""

import pytest
import yaml

from bnpaper import config, notebook, params, reproduce
from bnpaper.config import ConfigError

NB = "01_forced_memorization"


def _fake_root(tmp_path, monkeypatch, files: dict[str, str]):
    """A repository root with the real notebook sources and the given params files."""
    (tmp_path / "params").mkdir()
    (tmp_path / "notebooks").mkdir()
    for nb in config.NOTEBOOKS:
        src = config.repo_root() / "notebooks" / f"{nb}.py"
        (tmp_path / "notebooks" / f"{nb}.py").write_text(src.read_text())
        (tmp_path / "notebooks" / f"{nb}.ipynb").write_text("{}")
    for name in ("fashion_mnist", "quick", "ci"):
        (tmp_path / "params" / f"{name}.yaml").write_text(files.get(name, "{}\n"))
    monkeypatch.setenv("BNPAPER_ROOT", str(tmp_path))


@pytest.mark.parametrize("nb", config.NOTEBOOKS)
def test_declaration_names_equal_the_parameters_cell_and_its_defaults_pass(nb):
    d = params.defaults(nb)
    assert set(d) == set(params.DECLARATIONS[nb])
    params.validate(nb, d)


def test_quick_budget_is_every_notebooks_default():
    quick = params.load_yaml((config.repo_root() / "params" / "quick.yaml").read_text())
    for nb, section in quick.items():
        defaults = params.defaults(nb)
        assert {k: defaults[k] for k in section} == section, nb


def test_every_shipped_params_file_names_only_declared_keys():
    params.check_params_files()


@pytest.mark.parametrize(
    "text,value",
    [("1e-3", 0.001), ("5E-4", 0.0005), (".5", 0.5), ("+1.5e+2", 150.0), ("3", 3), ("-2", -2)],
)
def test_yaml_1_2_floats_are_numbers_and_integers_stay_integers(text, value):
    got = params.load_yaml(f"x: {text}")["x"]
    assert got == value and type(got) is type(value)


def test_runner_accepts_lr_1e_3_as_a_number():
    from bnpaper.__main__ import _override

    key, value = _override("lr=1e-3")
    assert (key, value) == ("lr", 0.001)
    assert reproduce.plan("fashion_mnist", "ci", ["01"], {"lr": value})[NB]["lr"] == 0.001


def test_merge_order_defaults_dataset_budget_explicit():
    r = params.resolve(NB, {"budget": "ci", "epochs": 7})
    ci = params.load_yaml((config.repo_root() / "params" / "ci.yaml").read_text())[NB]
    assert r.values["n_train"] == ci["n_train"] and r.values["epochs"] == 7
    assert r.source["n_train"] == "params/ci.yaml" and r.source["epochs"] == "explicit"


def test_dataset_file_applies_when_only_the_dataset_is_given():
    r = params.resolve("03_lira", {"dataset": "cifar10"})
    cifar = params.load_yaml((config.repo_root() / "params" / "cifar10.yaml").read_text())["all"]
    assert r.values["arch"] == cifar["arch"] == "resnet18" and r.values["lr"] == cifar["lr"]
    assert r.values["augment"] is True


def test_papermill_by_hand_and_the_runner_resolve_the_same_parameters(monkeypatch):
    """`papermill 03_lira.ipynb out.ipynb -p dataset cifar10` resolves as
    `reproduce --dataset cifar10 --only 03`."""
    monkeypatch.setattr(notebook, "check_data", lambda p: None)  # CIFAR-10 is not on this machine
    ns = dict(params.defaults("03_lira"))
    ns["dataset"] = "cifar10"
    ns["In"] = ["", '# Parameters\ndataset = "cifar10"\n', "<this cell>"]
    by_hand = notebook.start(ns, "03_lira", quiet=True).params
    injected = reproduce.plan("cifar10", "quick", ["03"])["03_lira"]
    assert by_hand == params.resolve("03_lira", injected).values


def test_an_explicit_value_equal_to_the_default_still_wins_over_the_dataset_file(monkeypatch):
    monkeypatch.setattr(notebook, "check_data", lambda p: None)
    ns = dict(params.defaults("03_lira"))
    ns.update(dataset="cifar10", In=["", '# Parameters\ndataset = "cifar10"\narch = "lenet"\n', ""])
    assert notebook.start(ns, "03_lira", quiet=True).params["arch"] == "lenet"


def test_start_can_run_twice_in_the_same_kernel_namespace():
    ns = dict(params.defaults(NB))
    first = notebook.start(ns, NB, quiet=True).params
    ns.update(NB="x", P={}, runs={}, curves=lambda: 0)  # the notebook's own variables
    assert notebook.start(ns, NB, quiet=True).params == first


def test_a_real_mistake_in_jupyterlab_is_one_error_naming_it():
    ns = dict(params.defaults(NB), runs={}, P={})
    ns["dataset"] = "cifar11"
    with pytest.raises(
        ConfigError, match=r"^dataset='cifar11' is not allowed; choose one of \['mnist'"
    ):
        notebook.start(ns, NB, quiet=True)


def test_papermill_injected_unknown_name_is_an_error():
    ns = dict(
        params.defaults(NB), In=["", "# Parameters\nnoise_fraction = 0.2\n", ""], noise_fraction=0.2
    )
    with pytest.raises(ConfigError, match=r"unknown parameter\(s\) \['noise_fraction'\]"):
        notebook.start(ns, NB, quiet=True)


def test_unknown_key_in_a_notebook_section_names_file_and_key(tmp_path, monkeypatch):
    _fake_root(tmp_path, monkeypatch, {"ci": f"{NB}:\n  epoch: 3\n"})
    with pytest.raises(
        ConfigError, match=r"ci.yaml: unknown parameter\(s\) \['epoch'\] in section"
    ):
        params.resolve(NB, {"budget": "ci"})


def test_unknown_key_in_the_all_section_is_an_error(tmp_path, monkeypatch):
    _fake_root(tmp_path, monkeypatch, {"fashion_mnist": "all:\n  archh: lenet\n"})
    with pytest.raises(
        ConfigError,
        match=r"fashion_mnist.yaml: unknown parameter\(s\) \['archh'\] in section 'all'",
    ):
        params.resolve(NB)


@pytest.mark.parametrize(
    "over,match",
    [
        ({"bogus": 1}, r"-p bogus: unknown parameter 'bogus'"),
        ({"03.bogus": 1}, r"-p 03.bogus: unknown parameter 'bogus' for notebook 03_lira"),
        ({"02.epochs": 1}, r"notebook 02_gradient_dynamics is not selected"),
        ({"dataset": "mnist"}, r"set by --dataset"),
    ],
)
def test_bad_runner_overrides_are_one_clear_error(over, match):
    with pytest.raises(ConfigError, match=match):
        reproduce.plan("fashion_mnist", "ci", ["01", "03"], over)


def test_a_prefixed_override_targets_one_notebook():
    p = reproduce.plan("fashion_mnist", "ci", ["01", "03"], {"03.n_shadows": 8, "epochs": 2})
    assert p["03_lira"]["n_shadows"] == 8 and "n_shadows" not in p[NB]
    assert p["03_lira"]["epochs"] == p[NB]["epochs"] == 2


def test_runner_checks_every_notebook_before_the_first_starts(monkeypatch):
    started = []
    monkeypatch.setattr(reproduce, "execute", lambda nb, *a, **k: started.append(nb))
    with pytest.raises(ConfigError, match=r"n_shadows=5 must be even"):
        reproduce.run("fashion_mnist", "ci", ["01", "03"], {"03.n_shadows": 5})
    assert started == []


@pytest.mark.parametrize(
    "over, match",
    [
        ({"dataset": "cifar11"}, r"dataset='cifar11' is not allowed; choose one of \['mnist'"),
        ({"noise_frac": 1.5}, r"noise_frac=1.5 is out of range; allowed: a number in \(0.0, 1.0\)"),
        ({"norms": ["bn", "gn"]}, r"norms=\['bn', 'gn'\] must include 'bn' and 'none'"),
        (
            {"batch_size": 9000},
            r"batch_size=9000 is out of range; allowed: an integer in \[2, 4000\]",
        ),
        ({"seeds": [0, 0]}, r"seeds=\[0, 0\] must not repeat values"),
        (
            {"n_train": 70000},
            r"n_train=70000 is out of range; allowed: an integer in \[10, 60000\]",
        ),
        (
            {"corruption": ["flip", "mislabel"]},
            r"corruption=\['flip', 'mislabel'\] contains \['mislabel'\]",
        ),
    ],
)
def test_bad_values_name_the_parameter_and_what_is_allowed(over, match):
    with pytest.raises(ConfigError, match=match):
        params.resolve(NB, over)


def test_cross_field_rules_of_lira():
    with pytest.raises(ConfigError, match=r"n_shadows=5 must be even"):
        params.resolve("03_lira", {"n_shadows": 5})
    with pytest.raises(ConfigError, match=r"trainer='packed' needs arch='lenet'"):
        params.resolve("03_lira", {"trainer": "packed", "arch": "resnet20"})


def test_reference_run_refuses_other_budgets_and_overrides():
    with pytest.raises(ConfigError, match=r"--reference is the quick budget"):
        reproduce.run("fashion_mnist", "ci", reference=True)
    with pytest.raises(ConfigError, match=r"--reference is the quick budget"):
        reproduce.run("fashion_mnist", "quick", overrides={"epochs": 1}, reference=True)


def test_flat_params_file_for_papermill_f_holds_every_parameter():
    flat = yaml.safe_load(params.flat_file("04", {"budget": "ci"}))
    assert set(flat) == set(params.DECLARATIONS["04_theory"]) and flat["budget"] == "ci"
    assert flat["toy_d"] == params.resolve("04", {"budget": "ci"}).values["toy_d"]


def test_only_accepts_numbers_and_names():
    assert reproduce.resolve_notebooks(["01"]) == [NB]
    with pytest.raises(ConfigError, match=r"notebook '09' is not a notebook of this project"):
        reproduce.resolve_notebooks(["09"])


@pytest.mark.parametrize(
    "name,value,kw,match",
    [
        ("noise_frac", 1.5, dict(lo=0, hi=1, hi_open=True), r"noise_frac=1.5 is out of range"),
        ("epochs", 2.5, dict(lo=1, integer=True), r"epochs=2.5 must be an integer"),
        ("lr", True, dict(lo=0), r"lr=True must be a number"),
    ],
)
def test_check_number_messages_name_key_value_and_range(name, value, kw, match):
    with pytest.raises(ConfigError, match=match):
        config.check_number(name, value, **kw)


def test_config_errors_render_in_notebooks_as_one_line_without_traceback():
    from bnpaper.data import DatasetNotFoundError

    for err in (
        ConfigError("noise_frac=1.5 is out of range"),
        DatasetNotFoundError("dataset='cifar10' was not found"),
    ):
        assert err._render_traceback_() == [f"{type(err).__name__}: {err}"]


def test_papermill_p_with_a_list_as_a_string_says_how_to_pass_it():
    ns = dict(
        params.defaults("03_lira"),
        In=["", '# Parameters\noutlier_frac = "[0.1]"\n', ""],
        outlier_frac="[0.1]",
    )
    with pytest.raises(
        ConfigError,
        match=r"outlier_frac='\[0.1\]' must be a list, got a string; "
        r"with papermill pass it as YAML: -y",
    ):
        notebook.start(ns, "03_lira", quiet=True)


def test_a_missing_ood_source_fails_in_start_before_any_training(monkeypatch, tmp_path):
    monkeypatch.setenv("BNPAPER_DATA", str(tmp_path))
    ns = dict(params.defaults(NB), ood_source="cifar100")
    with pytest.raises(ConfigError, match=r"cifar100"):
        notebook.start(ns, NB, quiet=True)


def test_results_folder_is_keyed_by_configuration():
    """The quick budget's own configuration is the bare dataset (the reference); another budget
    or any changed value gets its own folder, so a ResNet run never overwrites LeNet's."""
    base = params.resolve("01", {"dataset": "fashion_mnist", "budget": "quick"}).values
    assert params.config_label("01", base) == "fashion_mnist"
    other = params.resolve(
        "01", {"dataset": "fashion_mnist", "budget": "quick", "arch": "resnet20", "seeds": [0, 1]}
    ).values
    assert params.config_label("01", other) == "fashion_mnist.arch=resnet20.seeds=0,1"
    ci = params.resolve("01", {"dataset": "fashion_mnist", "budget": "ci"}).values
    assert params.config_label("01", ci) == "fashion_mnist.ci"
    # a value equal to what the budget gives is the budget's configuration, not a new one
    same = params.resolve(
        "01", {"dataset": "fashion_mnist", "budget": "ci", "epochs": ci["epochs"]}
    ).values
    assert params.config_label("01", same) == "fashion_mnist.ci"


def test_a_long_list_of_overrides_gives_a_short_unique_folder():
    a = params.resolve("01", {"dataset": "fashion_mnist", "seeds": list(range(40))}).values
    b = params.resolve("01", {"dataset": "fashion_mnist", "seeds": list(range(41))}).values
    la, lb = params.config_label("01", a), params.config_label("01", b)
    assert (
        len(la) <= 96 and len(lb) <= 96 and la != lb and la.startswith("fashion_mnist.seeds=0,1,2")
    )


def test_the_shipped_matrix_resolves_every_configuration_to_its_own_folder():
    budget, entries = reproduce.read_matrix()
    assert budget == "full" and entries
    labels = [
        (
            nb,
            params.config_label(
                nb,
                params.resolve(
                    nb, {"dataset": e.dataset, "budget": budget, **dict(e.values)}
                ).values,
            ),
        )
        for e in entries
        for nb in e.notebooks
    ]
    assert len(set(labels)) == len(labels)  # no configuration overwrites another
    assert all("." in label for _, label in labels)  # nor the quick reference (the bare dataset)


@pytest.mark.parametrize(
    "text, match",
    [
        (
            "budget: full\nruns:\n"
            "  - {notebooks: ['01'], datasets: [fashion_mnist], set: {epochs: -1}}\n",
            "epochs",
        ),
        ("budget: full\nruns:\n  - {notebooks: ['01'], datasets: [cifar11]}\n", "cifar11"),
        ("budget: full\nruns:\n  - {notebooks: ['01'], datasetz: [mnist]}\n", "must have"),
        ("budget: full\nrunz: []\n", "holds `budget` and `runs`"),
    ],
)
def test_a_bad_matrix_entry_is_one_clear_error_before_anything_runs(tmp_path, text, match):
    f = tmp_path / "m.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=match):
        reproduce.read_matrix(f)


@pytest.mark.parametrize("nb", config.NOTEBOOKS)
def test_every_notebook_trains_on_the_device_its_parameter_names(nb, monkeypatch):
    """device: auto is the CPU here and becomes the kernel's device; cuda without a GPU is one
    clear error at start, before any data is read or model trained."""
    monkeypatch.delenv("BNPAPER_DEVICE", raising=False)
    monkeypatch.setattr(config.torch.cuda, "is_available", lambda: False)
    ns = dict(params.defaults(nb))
    assert ns["device"] == "auto"
    notebook.start(ns, nb, quiet=True)
    assert config.device() == "cpu"
    ns["device"] = "cuda"
    with pytest.raises(ConfigError, match=r"device='cuda' but torch sees no GPU"):
        notebook.start(ns, nb, quiet=True)
    monkeypatch.setattr(config.torch.cuda, "is_available", lambda: True)
    notebook.start(dict(params.defaults(nb), device="auto"), nb, quiet=True)
    assert config.device() == "cuda"  # auto picks the GPU where there is one


def _reference_root(tmp_path, monkeypatch):
    """A repository root with the real params files and notebook sources, and committed outputs
    of notebook 01 from an earlier reference run."""
    _fake_root(tmp_path, monkeypatch, {})
    for src in REAL_PARAMS.glob("*.yaml"):
        (tmp_path / "params" / src.name).write_text(src.read_text())
    label = params.config_label(NB, params.resolve(NB, {"budget": "quick"}).values)
    for kind in ("figures", "results"):
        (tmp_path / kind / NB / label).mkdir(parents=True)
        (tmp_path / kind / NB / label / "old.txt").write_text("earlier run")
    return label


REAL_PARAMS = config.repo_root() / "params"


def _fake_notebook(fail: bool):
    """An `execute` that writes a figure, a result and a progress line as a notebook would, and
    then stops (`fail`) or finishes."""

    def execute(nb, injected, dst, log):
        from bnpaper import progress

        label = params.config_label(nb, params.resolve(nb, injected).values)
        for kind in ("figures", "results"):
            (config.output_root() / kind / nb / label).mkdir(parents=True, exist_ok=True)
            (config.output_root() / kind / nb / label / "new.txt").write_text("this run")
        progress.Counter("model").add(seconds=1.0)
        if fail:
            raise KeyboardInterrupt("interrupted in the middle of the notebook")

    return execute


def _page(executed, nb, label):
    path = config.output_root() / "figures" / nb / label / f"{nb}.html"
    path.write_text("<html>")
    return path


def test_an_interrupted_reference_run_leaves_the_committed_outputs_in_place(tmp_path, monkeypatch):
    label = _reference_root(tmp_path, monkeypatch)
    monkeypatch.setattr(reproduce, "execute", _fake_notebook(fail=True))
    with pytest.raises(KeyboardInterrupt):
        reproduce.run("fashion_mnist", "quick", ["01"], reference=True, log=lambda line: None)
    for kind in ("figures", "results"):
        assert sorted(p.name for p in (tmp_path / kind / NB / label).iterdir()) == ["old.txt"]
    assert config.output_root() == tmp_path  # the staging folder was only this notebook's


def test_a_finished_reference_run_replaces_the_committed_outputs(tmp_path, monkeypatch):
    label = _reference_root(tmp_path, monkeypatch)
    monkeypatch.setattr(reproduce, "execute", _fake_notebook(fail=False))
    monkeypatch.setattr(reproduce, "render_page", _page)
    logged = []
    reproduce.run("fashion_mnist", "quick", ["01"], reference=True, log=logged.append)
    figures = sorted(p.name for p in (tmp_path / "figures" / NB / label).iterdir())
    results = sorted(p.name for p in (tmp_path / "results" / NB / label).iterdir())
    assert figures == [f"{NB}.html", "new.txt"] and results == ["new.txt", "run_time.json"]
    assert f"[bnpaper] {NB}: model 1 trained (1 s)" in logged
    assert not (tmp_path / "runs" / ".reference" / NB).exists()
    assert not list((tmp_path / "figures" / NB).glob(".*"))  # nothing replaced is left behind


def test_the_runners_kernel_runs_without_the_unencrypted_tcp_warning(tmp_path, monkeypatch, capfd):
    """ipykernel warns on every run that it talks over TCP without encryption; the runner's kernel
    is encrypted (CurveZMQ) where pyzmq can. Checked against the same run without the option."""
    import nbformat

    pytest.importorskip("zmq").has("curve") or pytest.skip("pyzmq without CurveZMQ")
    _fake_root(tmp_path, monkeypatch, {})
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(tmp_path / "notebooks" / f"{NB}.ipynb"))
    warning = "running over TCP without encryption"
    options = reproduce.kernel_options
    monkeypatch.setattr(reproduce, "kernel_options", dict)
    reproduce.execute(NB, {}, tmp_path / "plain.ipynb", log=lambda line: None)
    assert warning in capfd.readouterr().err  # the check can see the warning
    monkeypatch.setattr(reproduce, "kernel_options", options)
    reproduce.execute(NB, {}, tmp_path / "out.ipynb", log=lambda line: None)
    assert warning not in capfd.readouterr().err
    assert nbformat.read(str(tmp_path / "out.ipynb"), 4).cells[-1].outputs[0]["text"] == "42\n"


def test_a_list_parameter_given_as_a_string_on_the_command_line_is_refused_before_any_run():
    """`-p 01.corruption=flip` parses as the string 'flip', where 01 wants a list: the plan refuses
    it in one line that says how to write it on this command line, before any kernel starts."""
    with pytest.raises(
        ConfigError,
        match=r"01_forced_memorization: corruption='flip' must be a list, got a string; "
        r"on the command line write it as YAML: -p '01\.corruption=\[flip\]'",
    ):
        reproduce.plan("fashion_mnist", "ci", ["01"], {"01.corruption": "flip"})
    todo = reproduce.plan("fashion_mnist", "ci", ["01"], {"01.corruption": ["flip"]})
    assert todo["01_forced_memorization"]["corruption"] == ["flip"]
