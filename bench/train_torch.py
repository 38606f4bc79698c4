#!/usr/bin/python3
"""The same measurement as train_bench.cc in PyTorch: forward + backward + SGD momentum step of an
MLP on pre-generated random batches, with a fixed number of threads."""
import argparse
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--dims", default="784,256,256,10")
p.add_argument("--batch", type=int, default=64)
p.add_argument("--threads", type=int, default=1)
p.add_argument("--steps", type=int, default=500)
p.add_argument("--device", default="cpu")
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(1)
dims = [int(d) for d in a.dims.split(",")]
layers = []
for i in range(len(dims) - 1):
    layers.append(torch.nn.Linear(dims[i], dims[i + 1]))
    if i + 2 < len(dims):
        layers.append(torch.nn.ReLU())
model = torch.nn.Sequential(*layers).to(a.device)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()
xs = [torch.randn(a.batch, dims[0], device=a.device) for _ in range(16)]
ys = [torch.randint(0, dims[-1], (a.batch,), device=a.device) for _ in range(16)]


def step(i):
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model(xs[i % 16]), ys[i % 16])
    loss.backward()
    opt.step()


def sync():
    if a.device.startswith("cuda"):
        torch.cuda.synchronize()


for i in range(20):
    step(i)
sync()
start = time.perf_counter()
for i in range(a.steps):
    step(i)
sync()
secs = time.perf_counter() - start
print(f"torch {a.dims} batch {a.batch} threads {a.threads} samples/s {a.steps * a.batch / secs:.0f}")
