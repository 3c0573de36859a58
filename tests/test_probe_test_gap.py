"""scripts/probe_test_gap.py: the probe's regularizers (dropout before the classifier, stochastic
depth in ResNet-20's blocks) leave the package's models unchanged at evaluation and drop what they
say in training; bad input is one clear error before any training."""

import importlib.util
from pathlib import Path

import pytest
import torch

from bnpaper.models import BasicBlock, NFBasicBlock, build_model

_path = Path(__file__).resolve().parents[1] / "scripts" / "probe_test_gap.py"
_spec = importlib.util.spec_from_file_location("probe_test_gap", _path)
probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probe)


@pytest.mark.parametrize("block", [NFBasicBlock(4, 4, 1, 1.3, 0.2), BasicBlock(4, 4, 1, "bn")])
def test_stochastic_depth_forward_equals_the_package_block_at_evaluation(block):
    torch.manual_seed(0)
    block.drop_rate = 0.5
    block.eval()
    x = torch.randn(3, 4, 5, 5)
    forward = (
        probe.nf_forward_with_drop_path
        if isinstance(block, NFBasicBlock)
        else probe.bn_forward_with_drop_path
    )
    torch.testing.assert_close(forward(block, x), block(x), rtol=0, atol=0)


def test_stochastic_depth_keeps_each_sample_whole_branch_scaled_or_drops_it():
    torch.manual_seed(0)
    block = NFBasicBlock(4, 4, 1, 1.3, 0.2).train()
    block.drop_rate = 0.5
    x = torch.randn(64, 4, 5, 5)
    branch = block(x) - x  # the package block: the branch always kept, unscaled
    out = probe.nf_forward_with_drop_path(block, x) - x
    dropped = out.flatten(1).abs().amax(1) == 0
    kept = ~dropped
    assert 0 < dropped.sum() < 64
    torch.testing.assert_close(out[kept], 2.0 * branch[kept])


def test_stochastic_depth_in_a_bn_block_drops_whole_branches_in_training():
    torch.manual_seed(0)
    block = BasicBlock(4, 4, 1, "bn").train()
    block.drop_rate = 0.5
    x = torch.randn(64, 4, 5, 5)
    torch.manual_seed(1)
    out = probe.bn_forward_with_drop_path(block, x)
    dropped = (out - torch.relu(x)).flatten(1).abs().amax(1) == 0  # relu(0 + x): the shortcut
    assert 0 < dropped.sum() < 64


def test_drop_rates_rise_linearly_to_the_last_block_and_dropout_sits_before_the_classifier():
    model = probe.with_drop_path(build_model, 0.1)("resnet20", "none", 1, 10, 28)
    rates = [m.drop_rate for m in model.modules() if isinstance(m, NFBasicBlock)]
    assert len(rates) == 9
    assert rates == pytest.approx([0.1 * (i + 1) / 9 for i in range(9)])
    model = probe.with_dropout(0.25)("resnet20", "bn", 1, 10, 28)
    assert isinstance(model.fc[0], torch.nn.Dropout) and model.fc[0].p == 0.25


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--dropout", "1.0"], "--dropout=1.0 is not allowed"),
        (["--arch", "lenet", "--dropout", "0.25"], "--dropout=0.25 is not allowed"),
        (["--arch", "lenet", "--drop-path", "0.1"], "--drop-path=0.1 is not allowed"),
        (["--flips", "-0.1"], "--flips=-0.1 is out of range"),
    ],
)
def test_bad_input_is_one_clear_error_before_any_training(argv, words, monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("trained before the input was checked")

    monkeypatch.setattr(probe, "fit", no_training)
    with pytest.raises(SystemExit, match=words):
        probe.main(argv + ["--dataset", "mnist_subset"])
