"""Quantities of a BN channel that survive rescaling of the weights feeding it.

BN makes a channel's output invariant to the scale of the weights w_c that feed it: with w_c
multiplied by k, sigma_c is multiplied by k (up to eps) and the output is unchanged. So
|gamma|/sigma is not a property of the function alone: it moves with |w_c|, which weight decay
shrinks and training length grows. Two readings that do not move:

- the **effective step** of the channel, lr / |w_c|^2 (van Laarhoven 2017, "L2 regularization
  versus batch and weight normalization"; Hoffer et al. 2018, "Norm matters"): the gradient of a
  scale-invariant function is orthogonal to w_c and scales as 1/|w_c|, so one SGD step turns the
  direction of w_c by an angle proportional to lr / |w_c|^2. Rescaling w_c by k and lr by k^2
  leaves every update of the function unchanged.
- **|gamma|/sigma at unit weight norm**, |gamma_c| |w_c| / sigma_c: sigma_c measured as if w_c
  had norm 1 (exact when eps is negligible against the variance).

`feeding_layers` pairs each BN layer with the convolution or linear layer whose output it
normalizes. Only direct pairs count (the layer just before the BN layer in module order, with as
many output channels as BN has features): where BN normalizes a concatenation (DenseNet's
pre-activation layers) no single weight feeds a channel, and that BN layer is left out.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from .models import bn_layers

FEEDING = (nn.Conv2d, nn.Linear)


def feeding_layers(model: nn.Module) -> dict[str, nn.Module]:
    """{BN layer name: the conv/linear layer feeding it} for every directly fed BN layer."""
    bn_names = {name for name, _ in bn_layers(model)}
    out: dict[str, nn.Module] = {}
    previous = None
    for name, module in model.named_modules():
        if name in bn_names and previous is not None:
            width = previous.out_channels if isinstance(previous, nn.Conv2d) else None
            width = previous.out_features if width is None else width
            if width == module.num_features:
                out[name] = previous
        if isinstance(module, FEEDING):
            previous = module
        elif name in bn_names:
            previous = None  # a BN layer's successor is fed by the BN layer, not a weight
    return out


def channel_weight_norms(layer: nn.Module) -> torch.Tensor:
    """|w_c| per output channel of a conv or linear layer: (channels,)."""
    w = layer.weight.detach()
    return w.reshape(w.shape[0], -1).norm(dim=1)


@torch.no_grad()
def scale_free(model: nn.Module, layers: list[dict], lr: float) -> list[dict]:
    """For each BN layer of `layers` (`gamma_sigma.gamma_sigma(model, ...)`) fed directly by a
    weight: its name, |w_c| per channel ("w_norm"), the effective step lr / |w_c|^2
    ("effective_step") and |gamma_c| |w_c| / sigma_c with sigma from batch statistics
    ("ratio_unit_w")."""
    if lr <= 0:
        raise ValueError(f"lr: got {lr!r}, expected a positive learning rate")
    feeding = feeding_layers(model)
    out = []
    for layer in layers:
        if layer["layer"] not in feeding:
            continue
        norm = channel_weight_norms(feeding[layer["layer"]]).cpu()
        out.append(
            {
                "layer": layer["layer"],
                "w_norm": norm,
                "effective_step": lr / norm**2,
                "ratio_unit_w": layer["gamma"] * norm / layer["sigma_batch"],
            }
        )
    return out
