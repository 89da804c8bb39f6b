"""Trains shardscope's GPT with PyTorch's own distributed implementations (Python
DistributedDataParallel, ZeroRedundancyOptimizer, FSDP2's fully_shard) on Gloo and the CPU, from
the initial weights and per-rank batches a C++ test wrote, and reports how far shardscope's
final weights are from PyTorch's.

usage: pytorch_reference.py --strategy ddp|zero|fsdp --config C.json --init I.pt
                            --batches B.pt --ours W.pt --out RESULT.json
"""

import argparse
import json
import math
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, d_model, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        heads = lambda z: z.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Mlp(nn.Module):
    def __init__(self, d_model, hidden):
        super().__init__()
        self.fc = nn.Linear(d_model, hidden)
        self.proj = nn.Linear(hidden, d_model)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, d_model, heads, hidden):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = Attention(d_model, heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = Mlp(d_model, hidden)

    def forward(self, x):
        h = x + self.attn(self.ln1(x))
        return h + self.mlp(self.ln2(h))


class Gpt(nn.Module):
    """The same architecture and parameter names as engine/model/gpt_model.cpp."""

    def __init__(self, m):
        super().__init__()
        d = m["d_model"]
        self.tok_emb = nn.Embedding(m["vocab"], d)
        self.pos_emb = nn.Embedding(m["seq"], d)
        self.blocks = nn.ModuleList(
            Block(d, m["heads"], d * m["mlp_ratio"]) for _ in range(m["layers"]))
        self.ln_f = nn.LayerNorm(d)
        self.tied = m["tie_embeddings"]
        if not self.tied:
            self.lm_head = nn.Linear(d, m["vocab"], bias=False)

    def forward(self, tokens, targets):
        t = tokens.shape[1]
        x = self.tok_emb(tokens) + self.pos_emb(torch.arange(t)).unsqueeze(0)
        for block in self.blocks:
            x = block(x)
        h = self.ln_f(x)
        logits = F.linear(h, self.tok_emb.weight) if self.tied else self.lm_head(h)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


def make_optimizer(params, o, zero):
    kwargs = dict(lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"],
                  weight_decay=o["weight_decay"])
    if zero:
        from torch.distributed.optim import ZeroRedundancyOptimizer
        return ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.AdamW, **kwargs)
    return torch.optim.AdamW(params, **kwargs)


def rank_main(rank, args, config, store_path, result_path):
    torch.set_num_threads(1)
    world = config["world"]
    dist.init_process_group("gloo", init_method="file://" + store_path, rank=rank,
                            world_size=world)
    model = Gpt(config["model"])
    model.load_state_dict(torch.load(args.init))
    if args.strategy == "fsdp":
        from torch.distributed.fsdp import fully_shard
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        trained = model
    else:
        trained = nn.parallel.DistributedDataParallel(model)
    optimizer = make_optimizer(trained.parameters(), config["optimizer"], args.strategy == "zero")
    batches = torch.load(args.batches)
    inputs, targets = batches["inputs"], batches["targets"]  # [steps, world, accum, mb, seq]
    accum = config["grad_accum"]
    for step in range(config["steps"]):
        optimizer.zero_grad(set_to_none=True)
        for micro in range(accum):
            loss = trained(inputs[step, rank, micro], targets[step, rank, micro]) / accum
            loss.backward()
        optimizer.step()
    state = model.state_dict()
    full = {}
    for name, value in state.items():
        if hasattr(value, "full_tensor"):  # FSDP2 keeps DTensors: every rank joins the gather
            value = value.full_tensor()
        full[name] = value.detach().clone()
    if rank == 0:
        torch.save(full, result_path)
    dist.barrier()
    dist.destroy_process_group()
    # The result is written. Leave without the interpreter's teardown: in about one run in six a
    # rank aborted there, after its last Python frame ("terminate called without an active
    # exception" from a C++ thread object PyTorch destroys at exit), which failed the comparison
    # though nothing in it had gone wrong.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--strategy", choices=["ddp", "zero", "fsdp"], required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--init", required=True)
    parser.add_argument("--batches", required=True)
    parser.add_argument("--ours", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open(args.config) as f:
        config = json.load(f)
    # Imported before the ranks are forked, once rather than once a rank (about 1 s each).
    if args.strategy == "fsdp":
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    if args.strategy == "zero":
        from torch.distributed.optim import ZeroRedundancyOptimizer  # noqa: F401
    with tempfile.TemporaryDirectory() as tmp:
        store_path = os.path.join(tmp, "store")
        result_path = os.path.join(tmp, "pytorch.pt")
        # Forked, not spawned: each rank starts from this process's imported torch instead of
        # importing it again (about 2 s of CPU a rank). Nothing has run torch's thread pools
        # here yet, so a child inherits no OpenMP state.
        mp.start_processes(rank_main, args=(args, config, store_path, result_path),
                           nprocs=config["world"], join=True, start_method="fork")
        theirs = torch.load(result_path)
    ours = torch.load(args.ours)
    if sorted(ours) != sorted(theirs):
        sys.exit("parameter names differ: %s vs %s" % (sorted(ours), sorted(theirs)))
    diff_sq = ref_sq = 0.0
    worst, worst_name = 0.0, ""
    for name, theirs_t in theirs.items():
        delta = (ours[name].double() - theirs_t.double())
        diff_sq += float(delta.pow(2).sum())
        ref_sq += float(theirs_t.double().pow(2).sum())
        if float(delta.abs().max()) > worst:
            worst, worst_name = float(delta.abs().max()), name
    moved = sum(float((theirs[n].double() - v.double()).abs().max())
                for n, v in torch.load(args.init).items())
    with open(args.out, "w") as f:
        json.dump({"rel_deviation": math.sqrt(diff_sq / ref_sq), "max_abs": worst,
                   "worst_parameter": worst_name, "pytorch_moved": moved}, f)


if __name__ == "__main__":
    main()
