"""A Python peer for tests/python_peer_test.cc's gossip-consensus test: a small torch model
flattened into one tensor, an SGD step per round on this peer's own random data (so the peers'
models differ), a short sleep so that the tool can ask for snapshots ahead, a mix, then the
peers' own consensus distance, printed by rank 0 for every round; each reports its loss for
the control channel's status."""
import os
import time

import torch

import gossip

rank = int(os.environ["GOSSIP_RANK"])
steps = int(os.environ.get("STEPS", "300"))
torch.manual_seed(1)  # the same initial model on every peer
model = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 5))
flat = gossip.flatten_parameters(model)
opt = torch.optim.SGD(model.parameters(), lr=0.5)
peer = gossip.Peer(flat, steps=steps)
torch.manual_seed(100 + rank)  # each peer its own data
for step in range(steps):
    time.sleep(0.02)
    x, y = torch.randn(32, 20), torch.randint(0, 5, (32,))
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    peer.mix(step, flat)
    peer.report(loss.item(), samples_per_s=32 / 0.02)
    xi, mean_norm2 = peer.consensus(flat)
    if rank == 0:
        print(f"round {step + 1} xi {xi:.9g} mean_norm2 {mean_norm2:.9g}", flush=True)
peer.average(flat)
print(f"final: peer {rank} params_crc {gossip.params_crc(flat):x}", flush=True)
peer.close()
