"""Writes real GPU traces with torch.profiler for the Kineto reader (issue 36): kernels on CUDA
streams, NCCL kernels, cuda_runtime calls and ac2g flows, one gzipped file per rank as
tensorboard_trace_handler writes them.

  python scripts/kineto-gpu-traces.py OUT_DIR

makes OUT_DIR/ddp-nccl-w1 (DistributedDataParallel over NCCL, one rank on cuda:0) and
OUT_DIR/ddp-gloo-w4 (four rank processes sharing cuda:0 over Gloo), each a small transformer
trained with AdamW, record_shapes and profile_memory, three profiled steps after one of
warm-up. Needs a GPU; scripts/gpu-check.sh's `kineto-gpu` section runs it with the machine's
own PyTorch.
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def model():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True)
    return torch.nn.TransformerEncoder(layer, 2).cuda()


def work(rank, world, backend, out, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(0)
    dist.init_process_group(backend, rank=rank, world_size=world)
    from torch.nn.parallel import DistributedDataParallel as DDP
    net = DDP(model(), device_ids=[0], bucket_cap_mb=1)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=3)
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities, schedule=schedule, record_shapes=True,
                                profile_memory=True,
                                on_trace_ready=torch.profiler.tensorboard_trace_handler(
                                    out, use_gzip=True)) as p:
        for step in range(4):
            torch.manual_seed(rank * 100 + step)
            x = torch.randn(8, 128, 256, device="cuda")
            net(x).pow(2).mean().backward()
            opt.step()
            opt.zero_grad()
            p.step()
    dist.barrier()
    dist.destroy_process_group()


def main():
    root = sys.argv[1]
    for port, (name, backend, world) in enumerate([("ddp-nccl-w1", "nccl", 1),
                                                   ("ddp-gloo-w4", "gloo", 4)]):
        out = os.path.join(root, name)
        os.makedirs(out, exist_ok=True)
        mp.spawn(work, args=(world, backend, out, 29860 + port), nprocs=world)
        print(out, sorted(os.listdir(out)), flush=True)


if __name__ == "__main__":
    main()
