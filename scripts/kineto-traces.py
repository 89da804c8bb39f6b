"""Writes the PyTorch profiler traces the Kineto reader is tested on (issue 36): real files that
PyTorch's own torch.profiler writes, one per rank, gzipped as tensorboard_trace_handler does.

  python scripts/kineto-traces.py OUT_DIR

makes OUT_DIR/ddp-w2, OUT_DIR/fsdp2-w4 and OUT_DIR/pipeline-w2: DistributedDataParallel,
FSDP2 (fully_shard) and torch.distributed.pipelining (GPipe), over Gloo on the CPU, with
record_shapes and profile_memory, three profiled steps after one of warm-up. Run it with the
venv's Python (the one LibTorch comes from); the shipped copies are in assets/traces/kineto/.
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 256),
                               torch.nn.GELU(), torch.nn.Linear(256, 64))


def profiled(out, steps, body):
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=steps)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                schedule=schedule, record_shapes=True, profile_memory=True,
                                on_trace_ready=torch.profiler.tensorboard_trace_handler(
                                    out, use_gzip=True)) as p:
        for step in range(steps + 1):
            body(step)
            p.step()


def training_step(net, rank):
    """One step of a data-parallel model: each rank its own batch, AdamW."""
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)

    def step(i):
        torch.manual_seed(rank * 100 + i)
        net(torch.randn(32, 64)).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
    return step


def ddp(rank, world):
    from torch.nn.parallel import DistributedDataParallel as DDP
    return training_step(DDP(model(), bucket_cap_mb=0.1), rank)


def fsdp2(rank, world):
    from torch.distributed.fsdp import fully_shard
    net = model()
    for layer in net:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(net)
    return training_step(net, rank)


def pipeline(rank, world):
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
    full = model()
    layers = list(full)
    half = len(layers) // 2 + 1
    part = torch.nn.Sequential(*(layers[:half] if rank == 0 else layers[half:]))
    stage = PipelineStage(part, rank, world, torch.device("cpu"))
    schedule = ScheduleGPipe(stage, n_microbatches=4, loss_fn=lambda y, t: (y - t).pow(2).mean())
    opt = torch.optim.AdamW(part.parameters(), lr=1e-3)

    def step(i):
        torch.manual_seed(i)
        x, target = torch.randn(32, 64), torch.randn(32, 64)
        if rank == 0:
            schedule.step(x)
        else:
            schedule.step(target=target)
        opt.step()
        opt.zero_grad()
    return step


def work(rank, world, kind, out, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    body = {"ddp": ddp, "fsdp2": fsdp2, "pipeline": pipeline}[kind](rank, world)
    profiled(out, 3, body)
    dist.barrier()
    dist.destroy_process_group()


def main():
    root = sys.argv[1]
    for port, (kind, world) in enumerate([("ddp", 2), ("fsdp2", 4), ("pipeline", 2)]):
        out = os.path.join(root, "%s-w%d" % (kind, world))
        os.makedirs(out, exist_ok=True)
        for old in os.listdir(out):
            os.remove(os.path.join(out, old))
        mp.spawn(work, args=(world, kind, out, 29760 + port), nprocs=world)
        print(out, sorted(os.listdir(out)))


if __name__ == "__main__":
    main()
