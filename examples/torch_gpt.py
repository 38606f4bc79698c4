"""Your own PyTorch model, trained by gossip peers: a small byte-level transformer on Debian's
fortunes text, one process per peer.
    PYTHONPATH=build/python build/bin/gossip-launch configs/torch-gpt4.yaml -- python3 examples/torch_gpt.py
Each peer samples windows from its own contiguous part of the text; gossip mixes after each step."""
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import gossip

STEPS, BATCH, CONTEXT, DIM = int(os.environ.get("STEPS", "200")), 32, 128, 128
rank, size = int(os.environ["GOSSIP_RANK"]), int(os.environ["GOSSIP_SIZE"])
d = "/usr/share/games/fortunes"
names = sorted(f for f in os.listdir(d) if not f.endswith(".dat") and os.path.isfile(f"{d}/{f}")
               and not os.path.islink(f"{d}/{f}"))
text = torch.tensor(list(b"".join(open(f"{d}/{f}", "rb").read() for f in names)), dtype=torch.long)
cut = len(text) - len(text) // 20  # the last 5 % is the validation text
part = text[:cut][rank * cut // size:(rank + 1) * cut // size]


class Gpt(nn.Module):
    def __init__(self, layers=4, heads=4):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(256, DIM), nn.Embedding(CONTEXT, DIM)
        nn.init.normal_(self.wte.weight, 0.0, 0.02)  # GPT-2's: the logits go through it (tied)
        nn.init.normal_(self.wpe.weight, 0.0, 0.02)
        block = nn.TransformerEncoderLayer(DIM, heads, 4 * DIM, 0.0, F.gelu, batch_first=True, norm_first=True)
        self.blocks, self.ln = nn.TransformerEncoder(block, layers), nn.LayerNorm(DIM)
        self.register_buffer("mask", torch.full((CONTEXT, CONTEXT), float("-inf")).triu(1))

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe.weight[:tokens.shape[1]]
        return self.ln(self.blocks(x, mask=self.mask)) @ self.wte.weight.t()  # tied embeddings


torch.set_num_threads(1)
torch.manual_seed(1)  # the same initial model on every peer
model = Gpt()
flat = gossip.flatten_parameters(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * s / STEPS)))
peer = gossip.Peer(flat, steps=STEPS)
g = torch.Generator().manual_seed(1 + rank)
for step in peer.steps():  # a peer taken back after a stall goes on at the run's step
    starts = torch.randint(0, len(part) - CONTEXT - 1, (BATCH,), generator=g)
    x = torch.stack([part[s:s + CONTEXT] for s in starts])
    y = torch.stack([part[s + 1:s + CONTEXT + 1] for s in starts])
    opt.zero_grad()
    F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1)).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    peer.mix(step, flat)
peer.average(flat)
peer.close()  # the evaluation below is this peer's alone
val = text[cut:]
windows = (len(val) - 1) // CONTEXT
with torch.no_grad():
    loss = sum(F.cross_entropy(model(val[w * CONTEXT:(w + 1) * CONTEXT][None]).reshape(-1, 256),
                               val[w * CONTEXT + 1:(w + 1) * CONTEXT + 1], reduction="sum").item()
               for w in range(windows)) / (windows * CONTEXT)
print(f"final: peer {rank} averaged_model_test_bpb {loss / math.log(2):.4f} params_crc {gossip.params_crc(flat):x}",
      flush=True)
