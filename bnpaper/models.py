"""LeNet-5, CIFAR ResNets (ResNet-20, ResNet-18) and a small DenseNet, each with a `norm` choice.

norm:
  "bn"          BatchNorm with learned gamma and beta (the paper's BN model)
  "none"        no normalization (the paper's no-BN model). LeNet-5 is the bare network; the
                ResNets and the DenseNet are normalization-free networks that train as well
                as with BN: scaled weight-standardized convolutions (`ScaledStdConv2d`) and,
                in the ResNets, residual branches scaled by alpha after dividing their input
                by its expected standard deviation beta (`NFBasicBlock`, NF-ResNets)
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
    """ResNet basic block with a normalization layer after each convolution (norm "bn", "gn",
    "bn_noaffine"; norm "none" builds `NFBasicBlock`)."""

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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.norm2(self.conv2(F.relu(self.norm1(self.conv1(x)))))
        return F.relu(out + self.shortcut(x))


# Var(gamma * relu(z)) = 1 for z ~ N(0, 1): gamma = sqrt(2 / (1 - 1/pi)) (Brock et al. 2021)
RELU_GAMMA = math.sqrt(2.0 / (1.0 - 1.0 / math.pi))


class ScaledStdConv2d(nn.Conv2d):
    """A convolution with scaled weight standardization (Brock, De & Smith 2021,
    "Characterizing signal propagation to close the performance gap in unnormalized ResNets",
    arXiv:2101.08692): each output channel o convolves with

        W_hat[o] = gain[o] * gamma / sqrt(fan_in) * (W[o] - mean(W[o])) / sqrt(var(W[o]) + eps)

    (mean and biased variance over the fan_in = c_in * kh * kw entries of W[o]), so that W_hat[o]
    has mean 0 and sum of squares gain[o]^2 gamma^2 var/(var + eps), about gain^2 gamma^2: an
    input i.i.d. over the fan-in with variance v gives an output of variance gain^2 gamma^2 v
    (gamma = `RELU_GAMMA` after a ReLU of unit Gaussian input makes it v = 1).
    Follows timm's `ScaledStdConv2d` (timm/layers/std_conv.py, R. Wightman: same gain of shape
    (c_out, 1, 1, 1) initialized at 1, same scale gamma * fan_in^-0.5, same eps 1e-6), which
    standardizes through `F.batch_norm` on the reshaped weight; here the mean and variance are
    written out (the same numbers), so that `standardization` can give the per-sample gradient
    rule (`grad_rules.ScaledStdConvRule`) the same quantities. timm is not a dependency.
    """

    def __init__(
        self,
        c_in: int,
        c_out: int,
        kernel_size: int,
        stride: int = 1,
        padding: int = 0,
        bias: bool = True,
        gamma: float = 1.0,
        eps: float = 1e-6,
    ):
        super().__init__(c_in, c_out, kernel_size, stride, padding, bias=bias)
        self.gain = nn.Parameter(torch.ones(c_out, 1, 1, 1))
        self.scale = gamma * self.weight[0].numel() ** -0.5
        self.eps = eps

    def standardization(self, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(u, sigma): u = (W - mean) / sigma, (c_out, fan_in), sigma = sqrt(var + eps), (c_out, 1)
        of a weight tensor w (the layer's own, or a detached copy)."""
        w2 = w.reshape(w.shape[0], -1)
        mean = w2.mean(1, keepdim=True)
        sigma = (w2.var(1, unbiased=False, keepdim=True) + self.eps).sqrt()
        return (w2 - mean) / sigma, sigma

    def standardized_weight(self) -> torch.Tensor:
        """W_hat, the weight the convolution uses (shape of `weight`)."""
        u, _ = self.standardization(self.weight)
        return u.reshape_as(self.weight) * (self.gain * self.scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.standardized_weight()
        return F.conv2d(x, w, self.bias, self.stride, self.padding, self.dilation, self.groups)


def nf_init(model: nn.Module) -> None:
    """The NF networks' initialization: convolutions' raw weights N(0, 1/fan_in) (the NF-Nets'
    fan-in variance scaling: the standardization removes their scale from the forward pass,
    which then sets only the effective step size), zero biases, a N(0, 0.01^2) classifier with
    zero bias (small initial logits; PyTorch's default Linear init trained no better in a
    trial)."""
    for m in model.modules():
        if isinstance(m, ScaledStdConv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="linear")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, 0.01)
            nn.init.zeros_(m.bias)


class NFBasicBlock(nn.Module):
    """A normalization-free pre-activation basic block (NF-ResNet, Brock et al. 2021):

        y = shortcut + alpha * conv2(relu(conv1(relu(x) / beta)))

    with `ScaledStdConv2d` convolutions (gamma = `RELU_GAMMA`) and beta the expected standard
    deviation of x. The branch keeps unit variance, so Var(y) = beta^2 + alpha^2 with the
    identity shortcut (shortcut = x), and 1 + alpha^2 in a transition block (stride or width
    change), whose shortcut is a 1x1 `ScaledStdConv2d` of relu(x) / beta. As timm's
    `NormFreeBlock` without a bottleneck, attention or SkipInit gain."""

    def __init__(self, c_in: int, c_out: int, stride: int, beta: float, alpha: float):
        super().__init__()
        self.beta, self.alpha = beta, alpha
        self.conv1 = ScaledStdConv2d(c_in, c_out, 3, stride, 1, gamma=RELU_GAMMA)
        self.conv2 = ScaledStdConv2d(c_out, c_out, 3, 1, 1, gamma=RELU_GAMMA)
        self.shortcut: nn.Module | None = None
        if stride != 1 or c_in != c_out:
            self.shortcut = ScaledStdConv2d(c_in, c_out, 1, stride, gamma=RELU_GAMMA)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(x) / self.beta
        skip = x if self.shortcut is None else self.shortcut(out)
        return skip + self.alpha * self.conv2(F.relu(self.conv1(out)))

    def output_variance(self, input_variance: float) -> float:
        """The expected variance of the block's output for input of `input_variance`."""
        return (1.0 if self.shortcut is not None else input_variance) + self.alpha**2


class ResNet(nn.Module):
    """CIFAR-style ResNet: 3x3 stem, stages of basic blocks, global average pool, linear.
    norm "none": the NF-ResNet of the same widths and depths (`NFBasicBlock`, the expected
    variance tracked from 1 after the stem, alpha = `alpha`), a ReLU before the pool."""

    def __init__(
        self,
        widths: tuple[int, ...],
        depths: tuple[int, ...],
        norm: str = "bn",
        in_channels: int = 3,
        n_classes: int = 10,
        alpha: float = 0.2,
    ):
        super().__init__()
        nf = norm == "none"
        self.stem = (
            ScaledStdConv2d(in_channels, widths[0], 3, 1, 1)
            if nf
            else nn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=False)
        )
        self.stem_norm = make_norm(norm, widths[0])
        blocks, c, var = [], widths[0], 1.0
        for i, (w, d) in enumerate(zip(widths, depths)):
            for j in range(d):
                stride = 2 if (j == 0 and i > 0) else 1
                if nf:
                    blocks.append(NFBasicBlock(c, w, stride, math.sqrt(var), alpha))
                    var = blocks[-1].output_variance(var)
                else:
                    blocks.append(BasicBlock(c, w, stride, norm))
                c = w
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(c, n_classes)
        if nf:
            nf_init(self)
            return
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem_norm(self.stem(x))
        if isinstance(self.stem, ScaledStdConv2d):  # pre-activation blocks: no ReLU before them
            x = F.relu(self.blocks(x))
        else:
            x = self.blocks(F.relu(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class DenseLayer(nn.Module):
    """A pre-activation dense layer: x concatenated with conv(relu(norm(x))); norm "none": the
    convolution is a `ScaledStdConv2d` with gamma = `RELU_GAMMA`, so the new features keep the
    variance of x's channels and the concatenation stays at that variance (no rescaling)."""

    def __init__(self, c_in: int, growth: int, norm: str):
        super().__init__()
        self.norm = make_norm(norm, c_in)
        if norm == "none":
            self.conv: nn.Conv2d = ScaledStdConv2d(c_in, growth, 3, 1, 1, gamma=RELU_GAMMA)
        else:
            self.conv = nn.Conv2d(c_in, growth, 3, 1, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.conv(F.relu(self.norm(x)))], 1)


class DenseNet(nn.Module):
    """A small DenseNet (3 dense blocks, pre-activation layers, compressing transitions).
    norm "none": every convolution a `ScaledStdConv2d` (gamma = `RELU_GAMMA` after a ReLU), the
    transitions' average pool scaled by `pool_gain` to give back the variance it removes
    (2, exact for i.i.d. features: the mean of 4 has a quarter of their variance; on
    Fashion-MNIST at initialization the features' variance grows about 2x a transition
    instead, which the positively homogeneous network tolerates), the initialization of
    `nf_init`."""

    def __init__(
        self,
        norm: str = "bn",
        in_channels: int = 3,
        n_classes: int = 10,
        growth: int = 12,
        layers_per_block: int = 4,
        pool_gain: float = 2.0,
    ):
        super().__init__()
        nf = norm == "none"
        c = 2 * growth
        mods: list[nn.Module] = [
            ScaledStdConv2d(in_channels, c, 3, 1, 1)
            if nf
            else nn.Conv2d(in_channels, c, 3, 1, 1, bias=False)
        ]
        for b in range(3):
            for _ in range(layers_per_block):
                mods.append(DenseLayer(c, growth, norm))
                c += growth
            if b < 2:
                mods += [make_norm(norm, c), nn.ReLU()]
                if nf:
                    mods += [ScaledStdConv2d(c, c // 2, 1, gamma=RELU_GAMMA), ScaledPool(pool_gain)]
                else:
                    mods += [nn.Conv2d(c, c // 2, 1, bias=False), nn.AvgPool2d(2)]
                c //= 2
        mods += [make_norm(norm, c), nn.ReLU()]
        self.features = nn.Sequential(*mods)
        self.fc = nn.Linear(c, n_classes)
        if nf:
            nf_init(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class ScaledPool(nn.Module):
    """2x2 average pooling times a fixed gain (the no-BN DenseNet's transitions)."""

    def __init__(self, gain: float):
        super().__init__()
        self.gain = gain

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.avg_pool2d(x, 2) * self.gain


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
