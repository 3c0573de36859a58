"""LeNet-5, CIFAR ResNets (ResNet-20, ResNet-18) and a small DenseNet, each with a `norm` choice.

norm:
  "bn"          BatchNorm with learned gamma and beta (the paper's BN model)
  "none"        no normalization (the paper's no-BN model); ResNets use a zero-initialized
                residual scale (SkipInit) so that they still train
  "gn"          GroupNorm: normalization without batch coupling (a control)
  "bn_noaffine" BatchNorm with gamma fixed at 1 and no beta: batch coupling without a learned
                scale (a control)
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import check_choice

NORMS = ("bn", "none", "gn", "bn_noaffine")


def make_norm(norm: str, channels: int, dim: int = 2) -> nn.Module:
    """The normalization layer for `channels` features (dim=2: images, dim=1: vectors)."""
    check_choice("norm", norm, NORMS)
    bn = nn.BatchNorm2d if dim == 2 else nn.BatchNorm1d
    if norm == "bn":
        return bn(channels)
    if norm == "bn_noaffine":
        return bn(channels, affine=False)
    if norm == "gn":
        return nn.GroupNorm(math.gcd(channels, 8), channels)
    return nn.Identity()


class LeNet5(nn.Module):
    """LeNet-5 (conv6-pool-conv16-pool-fc120-fc84-fc) with a norm after every hidden layer."""

    def __init__(
        self, norm: str = "bn", in_channels: int = 1, n_classes: int = 10, image_size: int = 28
    ):
        super().__init__()
        bias = norm == "none"
        pad = 2 if image_size == 28 else 0
        self.conv1 = nn.Conv2d(in_channels, 6, 5, padding=pad, bias=bias)
        self.norm1 = make_norm(norm, 6)
        self.conv2 = nn.Conv2d(6, 16, 5, bias=bias)
        self.norm2 = make_norm(norm, 16)
        side = ((image_size + 2 * pad - 4) // 2 - 4) // 2
        self.fc1 = nn.Linear(16 * side * side, 120, bias=bias)
        self.norm3 = make_norm(norm, 120, dim=1)
        self.fc2 = nn.Linear(120, 84, bias=bias)
        self.norm4 = make_norm(norm, 84, dim=1)
        self.fc3 = nn.Linear(84, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.norm1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.norm2(self.conv2(x))), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.norm3(self.fc1(x)))
        x = F.relu(self.norm4(self.fc2(x)))
        return self.fc3(x)


class BasicBlock(nn.Module):
    """ResNet basic block; without normalization the residual branch is scaled by a learned
    scalar initialized at zero (SkipInit, De & Smith 2020)."""

    def __init__(self, c_in: int, c_out: int, stride: int, norm: str):
        super().__init__()
        bias = norm == "none"
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=bias)
        self.norm1 = make_norm(norm, c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=bias)
        self.norm2 = make_norm(norm, c_out)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=bias), make_norm(norm, c_out)
            )
        self.skip_scale = nn.Parameter(torch.zeros(())) if norm == "none" else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.norm2(self.conv2(F.relu(self.norm1(self.conv1(x)))))
        if self.skip_scale is not None:
            out = out * self.skip_scale
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    """CIFAR-style ResNet: 3x3 stem, stages of basic blocks, global average pool, linear."""

    def __init__(
        self,
        widths: tuple[int, ...],
        depths: tuple[int, ...],
        norm: str = "bn",
        in_channels: int = 3,
        n_classes: int = 10,
    ):
        super().__init__()
        bias = norm == "none"
        self.stem = nn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=bias)
        self.stem_norm = make_norm(norm, widths[0])
        blocks, c = [], widths[0]
        for i, (w, d) in enumerate(zip(widths, depths)):
            for j in range(d):
                blocks.append(BasicBlock(c, w, 2 if (j == 0 and i > 0) else 1, norm))
                c = w
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(c, n_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.stem_norm(self.stem(x)))
        x = self.blocks(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class DenseLayer(nn.Module):
    def __init__(self, c_in: int, growth: int, norm: str):
        super().__init__()
        self.norm = make_norm(norm, c_in)
        self.conv = nn.Conv2d(c_in, growth, 3, 1, 1, bias=norm == "none")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.conv(F.relu(self.norm(x)))], 1)


class DenseNet(nn.Module):
    """A small DenseNet (3 dense blocks, pre-activation layers, compressing transitions)."""

    def __init__(
        self,
        norm: str = "bn",
        in_channels: int = 3,
        n_classes: int = 10,
        growth: int = 12,
        layers_per_block: int = 4,
    ):
        super().__init__()
        c = 2 * growth
        mods: list[nn.Module] = [nn.Conv2d(in_channels, c, 3, 1, 1, bias=norm == "none")]
        for b in range(3):
            for _ in range(layers_per_block):
                mods.append(DenseLayer(c, growth, norm))
                c += growth
            if b < 2:
                mods += [
                    make_norm(norm, c),
                    nn.ReLU(),
                    nn.Conv2d(c, c // 2, 1, bias=norm == "none"),
                    nn.AvgPool2d(2),
                ]
                c //= 2
        mods += [make_norm(norm, c), nn.ReLU()]
        self.features = nn.Sequential(*mods)
        self.fc = nn.Linear(c, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# arch -> its model from (norm, in_channels, n_classes, image_size)
BUILDERS: dict[str, Callable[[str, int, int, int], nn.Module]] = {
    "lenet": LeNet5,
    "resnet20": lambda norm, c, k, size: ResNet((16, 32, 64), (3, 3, 3), norm, c, k),
    "resnet18": lambda norm, c, k, size: ResNet((64, 128, 256, 512), (2, 2, 2, 2), norm, c, k),
    "densenet": lambda norm, c, k, size: DenseNet(norm, c, k),
}
ARCHS = tuple(BUILDERS)


def build_model(
    arch: str, norm: str, in_channels: int, n_classes: int, image_size: int
) -> nn.Module:
    """One model of `bnpaper.models` by name (`BUILDERS`)."""
    check_choice("arch", arch, ARCHS)
    check_choice("norm", norm, NORMS)
    return BUILDERS[arch](norm, in_channels, n_classes, image_size)


def bn_layers(model: nn.Module) -> list[tuple[str, nn.modules.batchnorm._BatchNorm]]:
    """(name, layer) for every BatchNorm layer of `model`, in forward order."""
    return [
        (n, m) for n, m in model.named_modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)
    ]
