"""A Python peer training a small torch model, for tests/python_peer_test.cc: the parameters are
flattened into one tensor (gossip.flatten_parameters), each peer takes SGD steps on its own random
data and mixes after each; at the end every peer averages and prints the crc of the flat tensor
and of the module's parameters read back through the module (they must be the same memory)."""
import os

import torch

import gossip

rank = int(os.environ["GOSSIP_RANK"])
torch.manual_seed(1)  # the same initial model on every peer
model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 3))
flat = gossip.flatten_parameters(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
peer = gossip.Peer(flat)
torch.manual_seed(100 + rank)  # each peer its own data
for step in range(10):
    x, y = torch.randn(16, 1, 8, 8), torch.randint(0, 3, (16,))
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    peer.mix(step, flat)
xi, _ = peer.consensus(flat)
peer.average(flat)
through_module = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
print(f"consensus {xi:.3g} module_crc {gossip.params_crc(through_module):x}", flush=True)
print(f"final: peer {peer.rank} params_crc {gossip.params_crc(flat):x}", flush=True)
