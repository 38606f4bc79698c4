"""Your own PyTorch model, trained by gossip peers: a CNN on Fashion-MNIST, one process per peer.
    PYTHONPATH=build/python build/bin/gossip-launch configs/torch-cnn4.yaml -- python3 examples/torch_cnn.py
Each peer trains on its iid shard; after every optimiser step gossip mixes the model with the
YAML's algorithm (here one-peer exponential gossip + a global average every 6 steps). With
GLOO_ALLREDUCE=1 the same processes average through torch.distributed (gloo) all-reduce instead:
the baseline of bench/python_cnn.sh."""
import gzip
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import gossip

EPOCHS, BATCH, LR = float(os.environ.get("EPOCHS", "3")), 32, 0.05
rank, size = int(os.environ["GOSSIP_RANK"]), int(os.environ["GOSSIP_SIZE"])


def load(kind, d="/usr/share/datasets/fashion-mnist"):
    x = np.frombuffer(gzip.open(f"{d}/{kind}-images-idx3-ubyte.gz").read(), np.uint8, offset=16)
    y = np.frombuffer(gzip.open(f"{d}/{kind}-labels-idx1-ubyte.gz").read(), np.uint8, offset=8)
    return torch.tensor(x.reshape(-1, 1, 28, 28) / 255.0, dtype=torch.float32), torch.tensor(y, dtype=torch.long)


torch.set_num_threads(1)
(x, y), (tx, ty) = load("train"), load("t10k")
shard = torch.randperm(len(x), generator=torch.Generator().manual_seed(1))[rank::size]  # iid shards
torch.manual_seed(1)  # the same initial model on every peer
model = nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                      nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
flat = gossip.flatten_parameters(model)  # before the optimiser: it then updates the views
opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9, weight_decay=5e-4)
steps = int(EPOCHS * (len(shard) // BATCH))
sched = torch.optim.lr_scheduler.OneCycleLR(opt, LR, total_steps=steps, pct_start=0.02, anneal_strategy="cos")
gloo = os.environ.get("GLOO_ALLREDUCE") == "1"
if gloo:
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ.get('GLOO_PORT', '29517')}",
                            rank=rank, world_size=size)
    mix = lambda step, t: dist.all_reduce(t.div_(size))  # noqa: E731 (sum of the size-ths: the mean)
else:
    peer = gossip.Peer(flat, steps=steps)
    mix = peer.mix
for step in (range(steps) if gloo else peer.steps()):  # gossip: the run's step after a rejoin
    epoch_step = step % (len(shard) // BATCH)
    if epoch_step == 0:
        order = shard[torch.randperm(len(shard), generator=torch.Generator().manual_seed(step + rank))]
    i = order[epoch_step * BATCH:(epoch_step + 1) * BATCH]
    opt.zero_grad()
    F.cross_entropy(model(x[i]), y[i]).backward()
    opt.step()
    sched.step()
    mix(step, flat)
if not gloo:  # (all-reduce: the models are one already)
    peer.average(flat)
    peer.close()  # the evaluation below is this peer's alone
with torch.no_grad():
    acc = sum((model(tx[j:j + 1000]).argmax(1) == ty[j:j + 1000]).sum().item() for j in range(0, len(tx), 1000)) / len(tx)
print(f"final: peer {rank} averaged_model_test_acc {acc:.4f} params_crc {gossip.params_crc(flat):x}", flush=True)
