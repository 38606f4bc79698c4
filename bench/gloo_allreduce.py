#!/usr/bin/python3
"""The torch.distributed baseline: gloo all_reduce (sum of floats) time per call on 127.0.0.1,
the slowest rank's mean, printed like bench/mpi_allreduce.c. Usage: gloo_allreduce.py N FLOATS ROUNDS"""
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, n, floats, rounds, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=n)
    x = torch.full((floats,), float(rank))
    for _ in range(3):
        dist.all_reduce(x)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(rounds):
        dist.all_reduce(x)
    mine = torch.tensor([(time.perf_counter() - t0) / rounds], dtype=torch.float64)
    dist.all_reduce(mine, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(f"gloo_allreduce n {n} floats {floats} seconds_per_round {mine.item():.6f}", flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    n, floats, rounds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    mp.spawn(worker, args=(n, floats, rounds, free_port()), nprocs=n, join=True)
