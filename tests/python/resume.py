"""A Python peer for tests/python_peer_test.cc's checkpoint test: a deterministic stand-in for
training (x ← 0.99·x + rank/100) and a mix per step; it prints the crc of its buffer where mix()
wrote a checkpoint, where it starts (0, or the step it resumed at under gossip-launch --resume)
and at the end, after the average."""
import os

import numpy as np

import gossip

rank = int(os.environ["GOSSIP_RANK"])
steps = int(os.environ.get("STEPS", "12"))
x = np.arange(1, 1001, dtype=np.float32) * (1 + rank / 10)
peer = gossip.Peer(x, steps=steps)
print(f"rank {rank} starts at step {peer.start_step} crc {gossip.params_crc(x):x}", flush=True)
for step in range(peer.start_step, steps):
    x *= np.float32(0.99)
    x += np.float32(rank / 100)
    peer.mix(step, x)
    if peer.checkpoint_due(step):
        print(f"rank {rank} checkpoint at step {step + 1} crc {gossip.params_crc(x):x}", flush=True)
peer.average(x)
print(f"final: peer {rank} params_crc {gossip.params_crc(x):x}", flush=True)
peer.close()
