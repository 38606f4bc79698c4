"""A Python peer for tests/python_peer_test.cc, started by gossip-launch CONFIG -- python3 THIS.
Peer r starts from the vector (1 + r/10)·(1, 2, ..., 1000) (norms alike: gossip's outlier guard
would refuse a far larger one), mixes it MIX_STEPS times, prints its consensus distance before
and after, then averages: every peer must end with (1 + (n−1)/20)·(1, ..., 1000)."""
import os
import sys

import numpy as np

import gossip

steps = int(os.environ.get("MIX_STEPS", "30"))
rank = int(os.environ["GOSSIP_RANK"])
base = np.arange(1, 1001, dtype=np.float32)
x = base * (1 + rank / 10)
peer = gossip.Peer(x)
before = peer.consensus(x)
for step in range(steps):
    peer.mix(step, x)
after = peer.consensus(x)
print(f"rank {peer.rank} of {peer.size} consensus before {before[0]:.6g} after {after[0]:.6g}", flush=True)
peer.average(x)
want = base * (1 + (peer.size - 1) / 20)
err = float(np.max(np.abs(x - want) / want))
print(f"final: peer {peer.rank} max_error {err:.3g} params_crc {gossip.params_crc(x):x}", flush=True)
sys.exit(0 if err < 1e-5 else 1)
