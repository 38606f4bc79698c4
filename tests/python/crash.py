"""A Python peer for tests/python_peer_test.cc's crash, stall and join tests: mixes STEPS rounds of
a buffer of FLOATS floats (a short sleep per round stands in for training), then averages; prints
its view size and how many rounds it mixed at the end. Meanwhile one of the peers is killed with
SIGKILL or paused, or a C++ peer joins: the peers must carry on and end as one."""
import os
import time

import numpy as np

import gossip

rank = int(os.environ["GOSSIP_RANK"])
steps = int(os.environ.get("STEPS", "150"))
x = np.arange(1, int(os.environ.get("FLOATS", "1000")) + 1, dtype=np.float32) * (1 + rank / 10)
peer = gossip.Peer(x, steps=steps)
print(f"rank {rank} pid {os.getpid()} started", flush=True)
mixes, last = 0, peer.start_step - 1
for step in peer.steps():  # a peer taken back after a stall continues at the run's step
    if step != last + 1:
        print(f"rank {rank} continues at step {step} after step {last}", flush=True)
    last = step
    time.sleep(0.02)
    peer.mix(step, x)
    mixes += 1
peer.average(x)
print(f"final: peer {rank} members {peer.size} params_crc {gossip.params_crc(x):x} mixes {mixes}", flush=True)
peer.close()
