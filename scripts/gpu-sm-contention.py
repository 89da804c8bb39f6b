"""Measures, on a lent GPU, what a collective's kernels running beside a GEMM cost that GEMM
(issue 34: whether sequence parallelism's all-gather hides behind the input gradient's GEMM).

  python scripts/gpu-sm-contention.py OUT.json

NCCL runs a collective as one thread block a channel, each on an SM of its own, for as long as
the collective lasts. One GPU has no peer to gather from, so a stand-in takes N SMs the same way:
a Triton kernel of N programs that either spins (the SMs taken, no memory traffic) or copies a
buffer in HBM (the SMs and memory bandwidth taken). Each GEMM is timed alone, the stand-in alone,
and both at once on two streams, all in device time between CUDA events with the queue filled
ahead. Nothing here looks at a step time.
"""

import json
import sys

import torch
import triton
import triton.language as tl

DEV = torch.device("cuda:0")


@triton.jit
def spin_kernel(out, iters, BLOCK: tl.constexpr):
    x = tl.arange(0, BLOCK).to(tl.float32)
    for _ in range(iters):
        x = x * 1.0000001 + 1e-7
    tl.store(out + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK), x)


@triton.jit
def copy_kernel(src, dst, n, nprog, BLOCK: tl.constexpr):
    for start in range(tl.program_id(0) * BLOCK, n, nprog * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


def timed(streams_fns, reps=3):
    """Device ms from before the first launch to after the last finished, over all streams;
    the least of reps."""
    best = float("inf")
    main = torch.cuda.current_stream()
    for _ in range(reps + 1):
        torch.cuda.synchronize()
        torch.cuda._sleep(100_000_000)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(main)
        ends = []
        for stream, fn in streams_fns:
            stream.wait_event(start)
            with torch.cuda.stream(stream):
                fn()
                e = torch.cuda.Event()
                e.record(stream)
                ends.append(e)
        for e in ends:
            main.wait_event(e)
        end.record(main)
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end))
    return best


def main():
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    result = {"device": props.name, "sms": sms, "torch": torch.__version__, "rows": []}
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    # Input-gradient GEMMs of 22B's layer at t 8, micro-batch 4 (8192 tokens), and of 175B's at
    # micro-batch 1. A sequence-parallel gather hides behind fc1's and qkv's; "22b.fc2.dgrad" is
    # the MLP projection's (fc1's has the same FLOPs, transposed: 8192 x 6144 x 3072), kept as
    # measured on 2026-11-27.
    gemms = {"22b.fc2.dgrad": (8192, 3072, 6144), "22b.qkv.dgrad": (8192, 6144, 2304),
             "175b.fc1.dgrad": (2048, 12288, 6144)}
    big = 1 << 28  # 512 MiB of bf16 for the copy to stream through
    src = torch.randn(big, device=DEV, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    spin_out = torch.empty(sms * 4 * 128, device=DEV)
    for name, (m, n, k) in gemms.items():
        a = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=DEV, dtype=torch.bfloat16)
        c = torch.empty(m, n, device=DEV, dtype=torch.bfloat16)
        reps = 20

        def gemm():
            for _ in range(reps):
                torch.matmul(a, b, out=c)

        alone = timed([(s1, gemm)]) / reps
        for kind in ("spin", "copy"):
            for ctas in (8, 16, 32, 66):
                if kind == "spin":
                    iters = 1 << 16
                    one = lambda: spin_kernel[(ctas,)](spin_out, iters, BLOCK=128)
                else:
                    one = lambda: copy_kernel[(ctas,)](src, dst, big, ctas, BLOCK=1024)
                one_ms = timed([(s2, one)], 1)
                # Launched back to back until they outlast the GEMMs, so that every GEMM runs
                # beside them.
                repeats = int(alone * reps / one_ms) + 2

                def side(one=one, repeats=repeats):
                    for _ in range(repeats):
                        one()

                side_alone = timed([(s2, side)], 1)
                both = timed([(s1, gemm), (s2, side)], 2)
                # How much longer the GEMMs took beside it: timed with their own events.
                torch.cuda.synchronize()
                torch.cuda._sleep(100_000_000)
                g0, g1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                go = torch.cuda.Event()
                go.record()
                s1.wait_event(go)
                s2.wait_event(go)
                with torch.cuda.stream(s2):
                    side()
                with torch.cuda.stream(s1):
                    g0.record(s1)
                    gemm()
                    g1.record(s1)
                torch.cuda.synchronize()
                beside = g0.elapsed_time(g1) / reps
                row = {"gemm": name, "m": m, "n": n, "k": k, "side": kind, "ctas": ctas,
                       "gemm_ms": alone, "gemm_beside_ms": beside,
                       "gemm_slowdown": beside / alone, "side_ms": side_alone,
                       "both_ms": both, "gemms_ms": alone * reps,
                       "side_launches": repeats, "copy_gbps": (4.0 * big / (one_ms * 1e-3) / 1e9) if kind == "copy" else None}
                result["rows"].append(row)
                print(f"{name:15s} {kind:4s} {ctas:3d} CTAs: GEMM {alone*1e3:7.1f} us alone, "
                      f"{beside*1e3:7.1f} beside ({beside/alone:5.3f}x); side {side_alone:7.3f} ms; "
                      f"{reps} GEMMs + side {both:7.3f} ms against {alone*reps:7.3f} + {side_alone:7.3f}"
                      + (f"; copy {row['copy_gbps']:.0f} GB/s" if kind == "copy" else ""), flush=True)
        del a, b, c
    with open(sys.argv[1], "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
