"""The Python side of tests/app/cli/weights_roundtrip_test.cpp: weights shardscope exported, read by
PyTorch and the safetensors package, trained one step in the same GPT (pytorch_reference.Gpt),
written back in every format --init-weights reads, and at the end what shardscope loaded from
those files compared with what Python wrote.

usage: weights_roundtrip.py train --config C.json --pt W.pt --safetensors W.safetensors --dir D
       weights_roundtrip.py verify --dir D
"""

import argparse
import json
import os
import sys

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_reference import Gpt  # noqa: E402  (the same architecture and names as ours)


def fail(message):
    sys.exit("weights_roundtrip: " + message)


def expect_same(name_a, a, name_b, b):
    if sorted(a) != sorted(b):
        fail("%s and %s hold different names: %s vs %s" % (name_a, name_b, sorted(a), sorted(b)))
    for key in a:
        if a[key].dtype != b[key].dtype or a[key].shape != b[key].shape:
            fail("%s: %s is %s %s, %s has %s %s" % (key, name_a, a[key].dtype,
                 tuple(a[key].shape), name_b, b[key].dtype, tuple(b[key].shape)))
        if not torch.equal(a[key], b[key]):
            delta = float((a[key].double() - b[key].double()).abs().max())
            fail("%s differs between %s and %s (max |delta| %g)" % (key, name_a, name_b, delta))


def train(args):
    with open(args.config) as f:
        config = json.load(f)
    from_pt = torch.load(args.pt)  # weights_only, the default since PyTorch 2.6
    from_st = load_file(args.safetensors)
    expect_same(args.pt, from_pt, args.safetensors, from_st)
    if any(t.dtype != torch.float32 for t in from_st.values()):
        fail("the export is not fp32")

    model = Gpt(config["model"])
    model.load_state_dict(from_pt, strict=True)  # every name, every shape
    torch.manual_seed(7)
    m = config["model"]
    tokens = torch.randint(0, m["vocab"], (4, m["seq"] + 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    loss = model(tokens[:, :-1], tokens[:, 1:])
    loss.backward()
    optimizer.step()

    state = model.state_dict()  # an OrderedDict with _metadata, as people save it
    if type(state).__name__ != "OrderedDict":
        fail("expected state_dict() to be an OrderedDict, got " + type(state).__name__)
    d = args.dir
    torch.save(state, os.path.join(d, "python.pt"))
    save_file({k: v.contiguous() for k, v in state.items()}, os.path.join(d, "python.safetensors"))
    save_file({k: v.to(torch.bfloat16).contiguous() for k, v in state.items()},
              os.path.join(d, "python_bf16.safetensors"))
    save_file({k: v.to(torch.float16).contiguous() for k, v in state.items()},
              os.path.join(d, "python_f16.safetensors"))
    torch.save({k: v.double() for k, v in state.items()}, os.path.join(d, "python_f64.pt"))
    moved = max(float((state[k] - from_pt[k]).abs().max()) for k in state)
    with open(os.path.join(d, "train.json"), "w") as f:
        json.dump({"moved": moved, "loss": loss.item(), "tensors": len(state)}, f)


def verify(args):
    d = args.dir
    state = torch.load(os.path.join(d, "python.pt"))
    # What shardscope's --init-weights loaded from each file, written back by shardscope.
    cases = [("loaded_from_pt.safetensors", lambda t: t),
             ("loaded_from_safetensors.pt", lambda t: t),
             ("loaded_from_bf16.safetensors", lambda t: t.to(torch.bfloat16).float()),
             ("loaded_from_f16.safetensors", lambda t: t.to(torch.float16).float()),
             ("loaded_from_f64.safetensors", lambda t: t.double().float())]
    for name, expected_of in cases:
        path = os.path.join(d, name)
        loaded = load_file(path) if name.endswith(".safetensors") else torch.load(path)
        expected = {k: expected_of(v) for k, v in state.items()}
        expect_same(name, loaded, "python.pt", expected)
    print("bitwise equal:", ", ".join(name for name, _ in cases))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["train", "verify"])
    parser.add_argument("--config")
    parser.add_argument("--pt")
    parser.add_argument("--safetensors")
    parser.add_argument("--dir", required=True)
    args = parser.parse_args()
    train(args) if args.command == "train" else verify(args)


if __name__ == "__main__":
    main()
