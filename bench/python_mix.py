"""The Python side of bench/python_mix.sh: one peer (started by gossip-launch CONFIG -- python3
THIS FLOATS ROUNDS) mixing a float32 numpy buffer of FLOATS values; prints the seconds per
peer.mix of the timed rounds (between two collective barriers, as exchange_bench times the C++
peer's rounds)."""
import os
import sys
import time

import numpy as np

import gossip

floats, rounds = int(sys.argv[1]), int(sys.argv[2])
rank = int(os.environ["GOSSIP_RANK"])
x = np.full(floats, 1.0 + 0.01 * rank, dtype=np.float32)  # alike, as models are: no outliers
peer = gossip.Peer(x, steps=3 + rounds)
for k in range(3):  # warm-up: connections, page faults
    peer.mix(k, x)
peer.consensus(x)  # a barrier
start = time.perf_counter()
for k in range(3, 3 + rounds):
    peer.mix(k, x)
secs = (time.perf_counter() - start) / rounds
peer.consensus(x)  # nobody leaves while a neighbour still needs its messages
print(f"python_mix rank {rank} seconds_per_round {secs:.6f}", flush=True)
peer.close()
