#!/usr/bin/python3
"""PyTorch side of bench/model_throughput.sh and bench/gpt_parity.sh.
  --throughput: the measurement of train_bench.cc (random batches, 1 thread), one line of output;
  --train: the GPT on the fortunes text as gossip trains it (same split, window sampling rule,
  steps, batch, AdamW, clipping and schedule); prints the validation loss and bits per byte."""
import argparse
import math
import os
import time

import torch
import torch.nn.functional as F

import torch_models as tm

p = argparse.ArgumentParser()
p.add_argument("--model", default="lenet", choices=["lenet", "resnet", "gpt"])
p.add_argument("--mode", default="throughput", choices=["throughput", "train"])
p.add_argument("--batch", type=int, default=64)
p.add_argument("--steps", type=int, default=200)
p.add_argument("--threads", type=int, default=1)
p.add_argument("--device", default="cpu", help="throughput mode only: cpu or cuda")
p.add_argument("--layers", type=int, default=4)
p.add_argument("--heads", type=int, default=4)
p.add_argument("--dim", type=int, default=128)
p.add_argument("--context", type=int, default=128)
p.add_argument("--lr", type=float, default=1e-3)
p.add_argument("--min_lr", type=float, default=1e-4)
p.add_argument("--warmup", type=int, default=50)
p.add_argument("--weight_decay", type=float, default=0.1)
p.add_argument("--seed", type=int, default=1)
p.add_argument("--text_dir", default="/usr/share/games/fortunes")
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(a.seed)


def make_model():
    if a.model == "lenet":
        return tm.lenet()
    if a.model == "resnet":
        return tm.resnet()
    return tm.Gpt(a.layers, a.heads, a.dim, a.context)


def throughput():
    dev = torch.device(a.device)
    model = make_model().to(dev)
    gpt = a.model == "gpt"
    opt = (torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0) if gpt
           else torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9))
    if gpt:
        xs = [torch.randint(0, 256, (a.batch, a.context), device=dev) for _ in range(16)]
        ys = [torch.randint(0, 256, (a.batch, a.context), device=dev) for _ in range(16)]
    else:
        xs = [torch.randn(a.batch, 1, 28, 28, device=dev) for _ in range(16)]
        ys = [torch.randint(0, 10, (a.batch,), device=dev) for _ in range(16)]
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    def step(i):
        opt.zero_grad(set_to_none=True)
        out = model(xs[i % 16])
        F.cross_entropy(out.reshape(-1, out.shape[-1]), ys[i % 16].reshape(-1)).backward()
        opt.step()

    for i in range(min(20, a.steps)):
        step(i)
    sync()
    start = time.perf_counter()
    for i in range(a.steps):
        step(i)
    sync()
    secs = time.perf_counter() - start
    line = f"torch {a.model} batch {a.batch} threads {a.threads} samples/s {a.steps * a.batch / secs:.0f}"
    if gpt:
        line += f" tokens/s {a.steps * a.batch * a.context / secs:.0f}"
    print(line)


def fortunes():
    """gossip's default text (src/model/text_corpus.cc): regular files, no .dat, sorted, the last
    5 % held out."""
    names = sorted(f for f in os.listdir(a.text_dir)
                   if not f.endswith(".dat") and os.path.isfile(os.path.join(a.text_dir, f))
                   and not os.path.islink(os.path.join(a.text_dir, f)))
    data = b"".join(open(os.path.join(a.text_dir, f), "rb").read() for f in names)
    cut = len(data) - int(len(data) * 0.05)
    return torch.tensor(list(data[:cut]), dtype=torch.long), torch.tensor(list(data[cut:]), dtype=torch.long)


def train():
    train_text, val = fortunes()
    model = make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    g = torch.Generator().manual_seed(a.seed)
    for step in range(a.steps):
        for group in opt.param_groups:
            group["lr"] = tm.learning_rate(step, a.steps, a.lr, a.warmup, a.min_lr)
        starts = torch.randint(0, len(train_text) - a.context, (a.batch,), generator=g)
        x = torch.stack([train_text[s:s + a.context] for s in starts])
        y = torch.stack([train_text[s + 1:s + 1 + a.context] for s in starts])
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if (step + 1) % 100 == 0:
            print(f"step {step + 1} loss {loss.item():.4f}", flush=True)
    windows = (len(val) - 1) // a.context  # consecutive windows, as gossip evaluates
    total, count = 0.0, 0
    with torch.no_grad():
        for w0 in range(0, windows, a.batch):
            ws = range(w0, min(windows, w0 + a.batch))
            x = torch.stack([val[w * a.context:(w + 1) * a.context] for w in ws])
            y = torch.stack([val[w * a.context + 1:(w + 1) * a.context + 1] for w in ws])
            total += F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1), reduction="sum").item()
            count += y.numel()
    print(f"torch final val_loss {total / count:.4f} bpb {total / count / math.log(2):.4f}")


throughput() if a.mode == "throughput" else train()
