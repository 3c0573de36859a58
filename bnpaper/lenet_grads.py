"""Exact batch-coupled per-sample gradient norms of LeNet-5 with BatchNorm, in mixed mode.

Mixed mode is tens of times cheaper than pushing one cotangent per loss term through the whole
network (`grads` method "exact"), with the same numbers.

Why it is expensive at all: in train mode every loss term l_k reaches every sample j through
the batch mean and variance of every BN layer, so the cotangent of l_k is dense over the batch
at every layer before the last BN (the coupling has rank min(B, 2 x BN channels) = B for
LeNet-5). Where those dense (K, B, ...) tensors are big — at the convolutions — this module
avoids them:
  * reverse mode, loss terms in chunks, for fc3, BN4, fc2, BN3, fc1, BN2 and conv2: the fc
    cotangents are small; below fc1 the cotangent of the max-pooled conv2 map is nonzero only
    at the pooling argmax positions, and BN2's backward adds terms in span{1, x_hat2} per
    channel, so conv2's weight gradient is a gathered GEMM plus closed-form corrections;
  * forward mode (JVPs) for conv1's weights and BN1's gamma and beta, one tangent per
    parameter (in_channels*25 + 2 per conv1 channel): a tangent lives on one channel until
    conv2, BN JVPs are closed forms, and the batch means that BN2's JVP needs come from the
    input tangent by linearity (sum_{b,l} x_hat2 conv(u) = <conv^T(x_hat2), u>), so the conv2
    output tangent is only needed at the pooling argmax positions.
Every step is exact (float rounding aside); tests compare it with the naive loop.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .models import LeNet5


def applies(model: nn.Module) -> bool:
    """True for a LeNet-5 whose four norm layers are BatchNorm and whose parameters all train."""
    return (
        isinstance(model, LeNet5)
        and all(
            isinstance(getattr(model, f"norm{i}"), nn.modules.batchnorm._BatchNorm)
            for i in range(1, 5)
        )
        and model.conv1.bias is None
        and model.conv2.bias is None
        and all(p.requires_grad for p in model.parameters())
    )


def _bn(z: torch.Tensor, bn: nn.Module):
    """Train-mode BN of z with its batch statistics: x_hat, gamma/sigma (broadcastable), y."""
    dims = [0] + list(range(2, z.dim()))
    mean, var = z.mean(dims, keepdim=True), z.var(dims, unbiased=False, keepdim=True)
    inv = torch.rsqrt(var + bn.eps)
    xhat = (z - mean) * inv
    shape = (1, -1) + (1,) * (z.dim() - 2)
    gamma = bn.weight.view(shape) if bn.weight is not None else z.new_ones(())
    beta = bn.bias.view(shape) if bn.bias is not None else z.new_zeros(())
    return xhat, gamma * inv, xhat * gamma + beta


def _bn_jvp(t: torch.Tensor, xhat: torch.Tensor, g: torch.Tensor, dims) -> torch.Tensor:
    """Tangent of a train-mode BN output for input tangent t (statistics over `dims`)."""
    return g * (t - t.mean(dims, keepdim=True) - xhat * (t * xhat).mean(dims, keepdim=True))


@torch.no_grad()
def batch_squared_norms(
    model: LeNet5, x: torch.Tensor, y: torch.Tensor, rows: torch.Tensor, chunk: int = 32
) -> dict[str, torch.Tensor]:
    """Squared per-sample gradient norms per group ("weight", "gamma", "beta", "bias") of the
    unreduced cross-entropy terms `rows` of one train-mode batch x: (B, C, H, W); each (R,)."""
    m, b = model, len(x)
    c1, c2 = m.conv1, m.conv2
    z1 = F.conv2d(x, c1.weight, None, c1.stride, c1.padding)
    xh1, g1, y1 = _bn(z1, m.norm1)
    p1, id1 = F.max_pool2d(F.relu(y1), 2, return_indices=True)
    z2 = F.conv2d(p1, c2.weight)
    xh2, g2, y2 = _bn(z2, m.norm2)
    p2, id2 = F.max_pool2d(F.relu(y2), 2, return_indices=True)
    f = p2.flatten(1)
    xh3, g3, y3 = _bn(f @ m.fc1.weight.T, m.norm3)
    r3 = F.relu(y3)
    xh4, g4, y4 = _bn(r3 @ m.fc2.weight.T, m.norm4)
    r4 = F.relu(y4)
    p = torch.softmax(r4 @ m.fc3.weight.T + m.fc3.bias, 1)
    batch_idx = torch.arange(b, device=x.device)
    p[batch_idx, y] -= 1  # d l_i / d logits_i
    affine = m.norm1.weight is not None
    sq = {
        k: x.new_zeros(b)
        for k in (("weight", "gamma", "beta", "bias") if affine else ("weight", "bias"))
    }
    n_c1, n_c2 = z1.shape[1], z2.shape[1]
    l1, l2 = z1[0, 0].numel(), z2[0, 0].numel()
    q1, q2 = p1[0, 0].numel(), p2[0, 0].numel()
    g2v, g3v, g4v = g2.reshape(n_c2), g3.reshape(-1), g4.reshape(-1)

    # ------------------------------------------------ reverse mode: fc3 .. conv2
    sq["bias"] += p.pow(2).sum(1)
    sq["weight"] += p.pow(2).sum(1) * r4.pow(2).sum(1)
    v4 = (p @ m.fc3.weight) * (y4 > 0)  # own cotangent at BN4's output
    if affine:
        sq["gamma"] += (v4 * xh4).pow(2).sum(1)
        sq["beta"] += v4.pow(2).sum(1)
    idx2 = id2.view(b, n_c2, q2)  # argmax positions in conv2's map
    cols2 = F.unfold(p1, c2.kernel_size).transpose(1, 2)  # (B, L2, C1*25)
    gathered = cols2[batch_idx[None, :, None], idx2.transpose(0, 1)]  # (C2, B, Q2, C1*25)
    gathered = gathered.reshape(n_c2, b * q2, -1)
    sum_cols = cols2.sum((0, 1))  # (C1*25,)
    xh2_cols = torch.einsum("bcl,blk->ck", xh2.view(b, n_c2, l2), cols2)  # (C2, C1*25)
    xh2_g = torch.gather(xh2.view(b, n_c2, l2), 2, idx2)
    on2 = (p2 > 0).view(b, n_c2, q2)  # ReLU open at the argmax
    gram_f = f @ f.T
    n2 = b * l2
    for s in range(0, len(rows), chunk):
        ks = rows[s : s + chunk]
        k = len(ks)
        dz4 = -(g4v / b) * (v4[ks, None, :] + xh4[None] * (v4 * xh4)[ks, None, :])
        dz4[torch.arange(k, device=x.device), ks] += g4v * v4[ks]  # (K, B, 84)
        sq["weight"][ks] += torch.matmul(dz4.transpose(1, 2), r3).pow(2).sum((1, 2))
        dy3 = (dz4 @ m.fc2.weight) * (y3 > 0)
        db3, dg3 = dy3.sum(1), (dy3 * xh3).sum(1)
        dz3 = g3v * (dy3 - db3[:, None] / b - xh3 * dg3[:, None] / b)  # (K, B, 120)
        sq["weight"][ks] += (torch.bmm(dz3, dz3.transpose(1, 2)) * gram_f).sum((1, 2))
        v2 = (dz3 @ m.fc1.weight).view(k, b, n_c2, q2) * on2  # BN2's output, sparse
        db2, dg2 = v2.sum((1, 3)), (v2 * xh2_g).sum((1, 3))
        if affine:
            sq["gamma"][ks] += dg3.pow(2).sum(1) + dg2.pow(2).sum(1)
            sq["beta"][ks] += db3.pow(2).sum(1) + db2.pow(2).sum(1)
        w2 = torch.bmm(v2.permute(2, 0, 1, 3).reshape(n_c2, k, b * q2), gathered).transpose(0, 1)
        w2 = w2 - (db2 / n2)[..., None] * sum_cols - (dg2 / n2)[..., None] * xh2_cols
        sq["weight"][ks] += (w2 * g2v[:, None]).pow(2).sum((1, 2))

    # ------------------------------------------------ forward mode: conv1, BN1
    cols1 = F.unfold(x, c1.kernel_size, c1.dilation, c1.padding, c1.stride).transpose(0, 1)
    n_w = cols1.shape[0]  # in_channels * 25 tangents
    n1 = b * l1
    mean_cols1 = cols1.mean((1, 2))
    # conv2^T of x_hat2 and of ones, per conv2 input channel o and output channel c
    wt = c2.weight.transpose(0, 1).reshape(n_c1 * n_c2, 1, *c2.kernel_size)
    xh2_t = F.conv_transpose2d(xh2.repeat(1, n_c1, 1, 1), wt, groups=n_c1 * n_c2)
    xh2_t = xh2_t.view(b, n_c1, n_c2, q1).permute(1, 0, 3, 2).reshape(n_c1, b * q1, n_c2)
    ones_t = F.conv_transpose2d(x.new_ones(1, n_c1 * n_c2, *z2.shape[2:]), wt, groups=n_c1 * n_c2)
    ones_t = ones_t.view(n_c1, n_c2, q1).transpose(1, 2)  # (C1, Q1, C2)
    p_rows = p[rows]
    for o in range(n_c1):
        xo, io = xh1[:, o].reshape(b, l1), id1[:, o].reshape(b, q1)
        mean_tx = (cols1.reshape(n_w, n1) @ xo.reshape(n1)) / n1
        xo_g = torch.gather(xo, 1, io)
        t = g1.reshape(-1)[o] * (
            torch.gather(cols1, 2, io.expand(n_w, b, q1))
            - mean_cols1[:, None, None]
            - xo_g * mean_tx[:, None, None]
        )
        if affine:  # gamma_o and beta_o: tangents x_hat1 and 1 at BN1's output
            t = torch.cat([t, xo_g[None], torch.ones_like(xo_g)[None]])
        t = t * (torch.gather(y1[:, o].reshape(b, l1), 1, io) > 0)  # (T, B, Q1)
        n_t = len(t)
        mean_t = (t.sum(1) @ ones_t[o]) / n2  # (T, C2)
        mean_tx2 = (t.reshape(n_t, b * q1) @ xh2_t[o]) / n2  # (T, C2)
        t = F.conv2d(t.reshape(n_t * b, 1, *p1.shape[2:]), c2.weight[:, o : o + 1])
        t = torch.gather(t.view(n_t, b, n_c2, l2), 3, idx2.expand(n_t, -1, -1, -1))
        t = g2v[:, None] * (t - mean_t[:, None, :, None] - xh2_g * mean_tx2[:, None, :, None])
        t = (t * on2).reshape(n_t, b, -1)
        t = _bn_jvp(t @ m.fc1.weight.T, xh3, g3v, (1,)) * (y3 > 0)
        t = _bn_jvp(t @ m.fc2.weight.T, xh4, g4v, (1,)) * (y4 > 0)
        dl = ((t[:, rows] @ m.fc3.weight.T) * p_rows).sum(2)  # (T, R)
        sq["weight"][rows] += dl[:n_w].pow(2).sum(0)
        if affine:
            sq["gamma"][rows] += dl[n_w].pow(2)
            sq["beta"][rows] += dl[n_w + 1].pow(2)
    return {k: v[rows] for k, v in sq.items()}
