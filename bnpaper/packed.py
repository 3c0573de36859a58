"""K LeNet-5 members as one "packed" model, and moving weights between it and its members.

Convolutions are grouped (groups=K), linear layers are batched matmuls with one weight per
member, and normalization runs over K*C channels, so every member keeps its own weights,
batch statistics and running statistics. Member k sees its own mini-batch (stacked along the
channel axis), its own data order and its own initialization: training K members packed is,
up to float rounding, the same as K runs of `train.fit` (tests check both). The trainer is
`bnpaper.packed_fit`.

Layout (bench/bench_train.py, 2 cores, K=8, batch 64 per member): the packed model trains in
channels_last, 2.1-2.3x the default layout (CPU grouped convolutions are slow in NCHW), which
makes packing 1.8-2.0x one LeNet at a time at batch 64 (about even, 1.05x, at batch 128).
torch.compile is slower on top of it (0.89x) and costs about 10 s of compilation per process
and shape: not used.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .models import LeNet5, make_norm


def _packed_norm(norm: str, k: int, c: int, dim: int) -> nn.Module:
    if norm == "gn":  # GroupNorm groups are contiguous channels: member k owns groups k*g..
        return nn.GroupNorm(k * math.gcd(c, 8), k * c)
    return make_norm(norm, k * c, dim)


class PackedLinear(nn.Module):
    """K independent linear layers: (K, B, in) -> (K, B, out)."""

    def __init__(self, k: int, n_in: int, n_out: int, bias: bool):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(k, n_out, n_in))
        self.bias = nn.Parameter(torch.zeros(k, 1, n_out)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight.transpose(1, 2)
        return torch.bmm(x, w) if self.bias is None else torch.baddbmm(self.bias, x, w)


class PackedLeNet(nn.Module):
    """K LeNet-5 members. Input (B, K*C, H, W) (member k's images in channels k*C..);
    output logits (K, B, classes)."""

    def __init__(
        self,
        k: int,
        norm: str = "bn",
        in_channels: int = 1,
        n_classes: int = 10,
        image_size: int = 28,
    ):
        super().__init__()
        self.k, self.norm, self.in_channels = k, norm, in_channels
        self.n_classes, self.image_size = n_classes, image_size
        ref = LeNet5(norm, in_channels, n_classes, image_size)
        bias = norm == "none"
        pad = ref.conv1.padding
        self.conv1 = nn.Conv2d(k * in_channels, k * 6, 5, padding=pad, groups=k, bias=bias)
        self.norm1 = _packed_norm(norm, k, 6, 2)
        self.conv2 = nn.Conv2d(k * 6, k * 16, 5, groups=k, bias=bias)
        self.norm2 = _packed_norm(norm, k, 16, 2)
        self.fc1 = PackedLinear(k, ref.fc1.in_features, 120, bias)
        self.norm3 = _packed_norm(norm, k, 120, 1)
        self.fc2 = PackedLinear(k, 120, 84, bias)
        self.norm4 = _packed_norm(norm, k, 84, 1)
        self.fc3 = PackedLinear(k, 84, n_classes, True)

    def _vec_norm(self, layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
        k, b, c = x.shape
        return layer(x.transpose(0, 1).reshape(b, k * c)).reshape(b, k, c).transpose(0, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # relu and max-pooling commute (relu is monotone): pooling first runs relu and its
        # backward on a 4x smaller tensor, the same values and gradients as LeNet5's order
        x = F.relu(F.max_pool2d(self.norm1(self.conv1(x)), 2))
        x = F.relu(F.max_pool2d(self.norm2(self.conv2(x)), 2))
        b = x.shape[0]
        x = x.reshape(b, self.k, -1).transpose(0, 1)  # (K, B, 16*s*s)
        x = F.relu(self._vec_norm(self.norm3, self.fc1(x)))
        x = F.relu(self._vec_norm(self.norm4, self.fc2(x)))
        return self.fc3(x)

    # ------------------------------------------------------------ member <-> packed weights
    _CONV = ("conv1", "conv2")
    _LIN = ("fc1", "fc2", "fc3")
    _NORM = ("norm1", "norm2", "norm3", "norm4")

    @torch.no_grad()
    def load_members(self, states: list[dict]) -> "PackedLeNet":
        """Copy K LeNet5 state_dicts into the packed weights."""
        if len(states) != self.k:
            raise ValueError(f"need {self.k} member states, got {len(states)}")
        own = self.state_dict()
        for name, t in own.items():
            layer, p = name.split(".", 1)
            if p == "num_batches_tracked":
                t.copy_(states[0][name])
            elif layer in self._LIN:
                t.copy_(torch.stack([s[name] if p == "weight" else s[name][None] for s in states]))
            else:
                t.copy_(torch.cat([s[name] for s in states]))
        return self

    def member_state(self, i: int) -> dict:
        """Member i's weights as a LeNet5 state_dict."""
        out = {}
        for name, t in self.state_dict().items():
            layer, p = name.split(".", 1)
            if p == "num_batches_tracked":
                out[name] = t.clone()
            elif layer in self._LIN:
                out[name] = t[i].clone() if p == "weight" else t[i, 0].clone()
            else:
                c = t.shape[0] // self.k
                out[name] = t[i * c : (i + 1) * c].clone()
        return out


def select_members(name: str, t: torch.Tensor, keep: list[int], k: int) -> torch.Tensor:
    """The members `keep` of a packed tensor `t` named `name` (a parameter, buffer or one of
    their optimizer states) of a K=`k` PackedLeNet."""
    layer, p = name.split(".", 1)
    if p == "num_batches_tracked":
        return t.clone()
    if layer in PackedLeNet._LIN:
        return t[keep]
    return t.reshape(k, -1, *t.shape[1:])[keep].reshape(-1, *t.shape[1:])


def pack_input(xb: torch.Tensor) -> torch.Tensor:
    """Member batches (K, B, C, H, W) -> packed input (B, K*C, H, W)."""
    k, b, c, h, w = xb.shape
    return xb.transpose(0, 1).reshape(b, k * c, h, w)
