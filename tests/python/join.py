"""A Python peer joining a running run (tests/python_peer_test.cc): python3 THIS CONFIG CONTACT
FLOATS STEPS. It receives the run's model into its zero buffer, mixes from its start step to the end
without training (its model is the mix of the others'), averages and prints the final line."""
import sys

import numpy as np

import gossip

config, contact, floats = sys.argv[1], sys.argv[2], int(sys.argv[3])
x = np.zeros(floats, dtype=np.float32)
peer = gossip.Peer(x, config=config, join=contact)
print(f"joined at step {peer.start_step} as rank {peer.rank} of {peer.size}, received norm {np.linalg.norm(x):.4g}",
      flush=True)
if peer.total_steps != int(sys.argv[4]):
    sys.exit(f"the welcome gave {peer.total_steps} steps, not the run's {sys.argv[4]}")
for step in peer.steps():  # to the run's length, from the welcome
    peer.mix(step, x)
peer.average(x)
print(f"final: peer {peer.rank} params_crc {gossip.params_crc(x):x}", flush=True)
peer.close()
