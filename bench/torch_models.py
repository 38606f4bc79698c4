"""PyTorch twins of gossip's presets (src/model/presets.cc), for the benchmarks: the same layers,
shapes and initialisation rules, so that throughput and accuracy compare like with like."""
import math

import torch
import torch.nn.functional as F
from torch import nn


def kaiming_relu_(module):
    """gossip's init for the CNNs: U(±√(6/fan_in)) weights, zero biases."""
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            fan_in = m.weight[0].numel()
            bound = math.sqrt(6.0 / fan_in)
            nn.init.uniform_(m.weight, -bound, bound)
            nn.init.zeros_(m.bias)


def lenet(classes=10):
    net = nn.Sequential(
        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, classes))
    kaiming_relu_(net)
    return net


class _Residual(nn.Module):
    def __init__(self, body):
        super().__init__()
        self.body = body

    def forward(self, x):
        return F.relu(x + self.body(x))


def resnet(width=32, groups=8, classes=10):
    """gossip's residual net: conv3x3+GroupNorm+ReLU stem, 2x2 max-pool, three stages (width,
    2x, 4x; the last two entered by a stride-2 conv3x3+GroupNorm+ReLU) of one residual block of
    two conv3x3+GroupNorm each, global average pooling, fc."""
    def conv_norm(cin, cout, stride):
        return [nn.Conv2d(cin, cout, 3, stride, 1), nn.GroupNorm(groups, cout)]

    def block(c):
        return _Residual(nn.Sequential(*conv_norm(c, c, 1), nn.ReLU(), *conv_norm(c, c, 1)))

    layers = [*conv_norm(1, width, 1), nn.ReLU(), nn.MaxPool2d(2), block(width)]
    for stage in (1, 2):
        c = width << stage
        layers += [*conv_norm(c // 2, c, 2), nn.ReLU(), block(c)]
    net = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * width, classes))
    kaiming_relu_(net)
    return net


class Gpt(nn.Module):
    """Pre-LayerNorm blocks, tanh GELU, tied embeddings, GPT-2's init."""

    def __init__(self, layers=4, heads=4, dim=128, context=128, vocab=256):
        super().__init__()
        self.heads = heads
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(context, dim)
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            b = nn.Module()
            b.ln1, b.qkv, b.proj = nn.LayerNorm(dim), nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            b.ln2, b.fc, b.out = nn.LayerNorm(dim), nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
            self.blocks.append(b)
        self.ln_f = nn.LayerNorm(dim)
        self.register_buffer("mask", torch.ones(context, context, dtype=torch.bool).triu(1))
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "ln" in name:
                nn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "out.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, tokens):
        n, t = tokens.shape
        x = self.wte(tokens) + self.wpe.weight[:t]
        for b in self.blocks:
            q, k, v = b.qkv(b.ln1(x)).split(x.shape[-1], dim=2)
            q, k, v = (z.view(n, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
            att = att.masked_fill(self.mask[:t, :t], float("-inf")).softmax(-1)
            x = x + b.proj((att @ v).transpose(1, 2).reshape(n, t, -1))
            x = x + b.out(F.gelu(b.fc(b.ln2(x)), approximate="tanh"))
        return self.ln_f(x) @ self.wte.weight.t()


def learning_rate(step, total, base, warmup, min_lr=0.0):
    """gossip's cosine schedule with linear warm-up (src/model/schedule.cc)."""
    if warmup > 0 and step < warmup:
        return base * (step + 1) / warmup
    t = min(max((step - warmup) / max(1, total - warmup), 0.0), 1.0)
    return min_lr + 0.5 * (base - min_lr) * (1 + math.cos(math.pi * t))
