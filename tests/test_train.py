import math

import numpy as np
import pytest
import torch

from bnpaper import data, train
from bnpaper.config import ConfigError


def _toy_split(n=256, noise=0.1, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 4, (n,), generator=g)
    x = (torch.rand(n, 1, 28, 28, generator=g) * 60).to(torch.uint8)
    x[torch.arange(n), 0, 4 + 5 * y, 4:24] = 255  # a learnable stripe per class
    y_new, mask = data.flip_labels(y, noise, 4, seed)
    return data.Split(x, y_new, y, mask, x[:64], y[:64], 4, (0.2,), (0.3,))


def test_training_is_deterministic_under_a_seed():
    sp = _toy_split()
    cfg = train.TrainConfig(norm="bn", epochs=2, batch_size=32, lr=0.05, seed=3)
    a, b = train.fit(sp, cfg, progress=False), train.fit(sp, cfg, progress=False)
    assert all(torch.equal(a.state[k], b.state[k]) for k in a.state)
    assert a.history["train_loss"][1:] == b.history["train_loss"][1:]
    assert math.isnan(a.history["train_loss"][0])  # epoch 0 is the initialization
    np.testing.assert_equal(a.history, b.history)  # NaN equals NaN here (rare_test_acc: no group)


def test_history_records_memorization_and_test_accuracy():
    sp = _toy_split()
    res = train.fit(sp, train.TrainConfig(epochs=3, batch_size=32, lr=0.05), progress=False)
    h = res.history
    assert h["epoch"] == [0, 1, 2, 3]
    for key in ("clean_acc", "noisy_acc", "noisy_true_acc", "test_acc", "clean_loss", "noisy_loss"):
        assert len(h[key]) == 4 and all(0 <= v for v in h[key])
    assert h["test_acc"][-1] > 0.9  # the stripes are learnable
    # memorization is measured against the corrupted labels: exactly the flipped ones
    m = res.model(1, 4, 28)
    _, correct = train.per_sample_loss(m, data.normalize(sp.x, sp.mean, sp.std), sp.y)
    assert abs(float(correct[sp.mask].float().mean()) - h["noisy_acc"][-1]) < 1e-6


def test_rare_test_acc_is_the_accuracy_on_the_marked_test_samples():
    from dataclasses import replace

    sp = _toy_split(noise=0.0)
    sp = replace(sp, test_mask=sp.y_test == 2)
    res = train.fit(sp, train.TrainConfig(epochs=1, batch_size=32, lr=0.05), progress=False)
    m = res.model(1, 4, 28)
    xt = data.normalize(sp.x_test, sp.mean, sp.std)
    hits = [
        int(m(xt[i : i + 1]).argmax()) == int(sp.y_test[i])
        for i in range(len(xt))
        if sp.test_mask[i]
    ]
    assert res.history["rare_test_acc"][-1] == pytest.approx(sum(hits) / len(hits), abs=1e-12)
    no_group = train.fit(_toy_split(), train.TrainConfig(epochs=1, batch_size=32), progress=False)
    assert all(math.isnan(v) for v in no_group.history["rare_test_acc"])


def test_resume_from_checkpoint_gives_identical_result(tmp_path):
    sp = _toy_split()
    cfg = train.TrainConfig(epochs=3, batch_size=32, lr=0.05, seed=1)
    full = train.fit(sp, cfg, progress=False)
    ckpt = tmp_path / "run.partial"

    class Stop(Exception):
        pass

    def kill_after_two(epoch, model):
        if epoch == 3:
            raise Stop

    with pytest.raises(Stop):
        train.fit(sp, cfg, checkpoint=ckpt, on_epoch_end=kill_after_two, progress=False)
    assert torch.load(ckpt, weights_only=False)["epoch"] == 2
    resumed = train.fit(sp, cfg, checkpoint=ckpt, progress=False)
    assert all(torch.equal(full.state[k], resumed.state[k]) for k in full.state)
    assert full.history["noisy_acc"] == resumed.history["noisy_acc"]


def test_divergence_stops_with_a_clear_error():
    sp = _toy_split()
    cfg = train.TrainConfig(norm="none", epochs=1, batch_size=32, lr=0.05)
    with pytest.raises(train.TrainingDiverged, match=r"diverged at epoch 1.*lower lr"):
        train.fit(sp, cfg, regularizer=lambda m: torch.tensor(float("nan")), progress=False)


def test_cosine_schedule_endpoints():
    cfg = train.TrainConfig(lr=0.1)
    assert train.lr_at(cfg, 0, 100) == pytest.approx(0.1)
    assert train.lr_at(cfg, 50, 100) == pytest.approx(0.05)
    step = train.TrainConfig(lr=0.1, schedule="step")
    assert train.lr_at(step, 80, 100) == pytest.approx(0.001)


def test_crop_flip_moves_pixels_without_changing_values():
    x = torch.arange(2 * 1 * 8 * 8, dtype=torch.float32).reshape(2, 1, 8, 8) + 1
    out = train.random_crop_flip(x, torch.Generator().manual_seed(0), pad=2)
    assert out.shape == x.shape
    vals = set(out[out != 0].tolist())
    assert vals <= set(x.flatten().tolist()) and len(vals) >= 2 * 6 * 6


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("epochs", 0, r"epochs=0 is out of range"),
        ("lr", -1.0, r"lr=-1.0 is out of range"),
        ("norm", "batch", r"norm='batch' is not allowed"),
        ("schedule", "linear", r"schedule="),
    ],
)
def test_bad_train_config_is_rejected(field, value, match):
    with pytest.raises(ConfigError, match=match):
        train.TrainConfig(**{field: value})


def test_recipe_from_params_takes_every_field_the_parameters_name_and_the_changes():
    p = {
        "arch": "lenet",
        "epochs": 3,
        "batch_size": 32,
        "lr": 0.02,
        "weight_decay": 1e-4,
        "augment": False,
        "norms": ["bn", "none"],
        "seeds": [0, 1],
        "dataset": "mnist",
    }
    got = train.TrainConfig.from_params(p, norm="none", seed=1)
    assert got == train.TrainConfig(
        arch="lenet",
        norm="none",
        epochs=3,
        batch_size=32,
        lr=0.02,
        weight_decay=1e-4,
        augment=False,
        seed=1,
    )


def test_snapshots_and_a_checkpoint_together_are_refused_before_training(tmp_path):
    y = torch.zeros(8, dtype=torch.long)
    x = torch.zeros(8, 1, 28, 28, dtype=torch.uint8)
    sp = data.Split(x, y, y, torch.zeros(8, dtype=torch.bool), x, y, 2, (0.5,), (0.5,))
    cfg = train.TrainConfig(epochs=1, batch_size=4)
    with pytest.raises(ValueError, match="snapshots are not kept across a resumed checkpoint"):
        train.fit(sp, cfg, checkpoint=tmp_path / "ckpt.pt", snapshots=(0.5,), progress=False)
    assert not (tmp_path / "ckpt.pt").exists()
