"""|gamma|/sigma per BN channel measured in trained networks, and the trained-network study."""

from __future__ import annotations

import torch
import torch.nn as nn

from .models import bn_layers


@torch.no_grad()
def gamma_sigma(
    model: nn.Module, x: torch.Tensor, batch_size: int = 128, n_batches: int = 4
) -> list[dict]:
    """Per BN layer: |gamma|/sigma per channel (the factor is its square), sigma from the running
    variance and from batch statistics (median over `n_batches` batches of `x`: (N, C, H, W),
    normalized images)."""
    n_batches = max(1, min(n_batches, len(x) // batch_size))  # whole batches only
    layers = bn_layers(model)
    seen: dict[str, list[torch.Tensor]] = {name: [] for name, _ in layers}
    hooks = []
    for name, layer in layers:

        def hook(mod, inp, out, name=name):
            v = inp[0].transpose(0, 1).reshape(inp[0].shape[1], -1)
            seen[name].append((v.var(1, unbiased=False) + mod.eps).sqrt())

        hooks.append(layer.register_forward_hook(hook))
    was, moms = model.training, [layer.momentum for _, layer in layers]
    model.train()  # training-mode forward: each BN layer normalizes by these batch statistics
    for _, layer in layers:
        layer.momentum = 0.0  # ... while its running statistics stay unchanged
    for k in range(n_batches):
        model(x[k * batch_size : (k + 1) * batch_size])
    for h, (_, layer), mom in zip(hooks, layers, moms):
        h.remove()
        layer.momentum = mom
    model.train(was)
    out = []
    for name, layer in layers:
        gam = layer.weight.abs() if layer.weight is not None else torch.ones(layer.num_features)
        s_run = (layer.running_var + layer.eps).sqrt()
        s_batch = torch.stack(seen[name]).median(0).values
        out.append(
            {
                "layer": name,
                "ratio_running": (gam / s_run).cpu(),
                "ratio_batch": (gam / s_batch).cpu(),
                "gamma": gam.cpu(),
                "sigma_running": s_run.cpu(),
                "sigma_batch": s_batch.cpu(),
            }
        )
    return out
