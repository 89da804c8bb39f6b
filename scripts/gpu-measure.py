"""Measures, on a lent GPU, what the projection's GPU compute model takes from the hardware
(issue 34): a bf16 GEMM sweep over the shapes the Table 5 configurations run, the per-kernel
turnaround on the device, the host's eager dispatch cost per operator, HBM copy bandwidth and
flash attention's rate. Nothing here looks at a step time.

  python scripts/gpu-measure.py OUT.json          # bf16: everything above
  python scripts/gpu-measure.py --fp32 OUT.json   # fp32 (TF32 off, as LibTorch leaves it): the
                                                  # GEMM sweep and attention, what an fp32 run
                                                  # computes differently

Every timing is device time between CUDA events, taken with the queue filled ahead by a sleep
kernel, so that a slow or busy host (a build beside it) does not leave gaps between the kernels
being timed. Run it with the machine's own PyTorch; scripts/gpu-check.sh's `measure` section
does.
"""

import json
import statistics
import sys
import time

import torch

DEV = torch.device("cuda:0")
DTYPE = torch.bfloat16  # --fp32 sets torch.float32


def device_ms(fn, reps, sleep_cycles=200_000_000):
    """Milliseconds of device time per call of fn, its calls queued behind a sleep kernel."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(3):
        torch.cuda._sleep(sleep_cycles)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) / reps)
    return min(samples)


def gemm_shapes():
    """(name, m, n, k) of every matmul of a transformer layer under tensor parallelism t=8, forward
    (fwd), input gradient (dgrad) and weight gradient (wgrad), for the Table 5 models; then the
    small models at world 1 and a square ladder."""
    shapes = []
    for model, h, micro_batch in (("22b", 6144, 4), ("175b", 12288, 1), ("530b", 20480, 1),
                                  ("1t", 25600, 1)):
        t, tokens = 8, micro_batch * 2048
        for op, n, k in (("qkv", 3 * h // t, h), ("proj", h, h // t), ("fc1", 4 * h // t, h),
                         ("fc2", h, 4 * h // t), ("logits", 51200 // t, h)):
            shapes.append((f"{model}.{op}.fwd", tokens, n, k))
            shapes.append((f"{model}.{op}.dgrad", tokens, k, n))
            shapes.append((f"{model}.{op}.wgrad", k, n, tokens))
    for model, d, tokens in (("tiny", 64, 8 * 32), ("small", 384, 8 * 128), ("gpt2s", 768, 8 * 1024)):
        for op, n, k in (("qkv", 3 * d, d), ("fc1", 4 * d, d), ("fc2", d, 4 * d)):
            shapes.append((f"{model}.{op}.fwd", tokens, n, k))
    for s in (256, 512, 1024, 2048, 4096, 8192, 16384):
        shapes.append((f"square.{s}", s, s, s))
    return shapes


def gemm_sweep():
    rows = []
    for name, m, n, k in gemm_shapes():
        a = torch.randn(m, k, device=DEV, dtype=DTYPE)
        b = torch.randn(k, n, device=DEV, dtype=DTYPE)
        c = torch.empty(m, n, device=DEV, dtype=DTYPE)
        flops = 2.0 * m * n * k
        reps = max(5, min(200, int(2e12 / flops)))
        ms = device_ms(lambda: torch.matmul(a, b, out=c), reps)
        rows.append({"name": name, "m": m, "n": n, "k": k, "ms": ms,
                     "tflops": flops / (ms * 1e-3) / 1e12})
        print(f"gemm {name:18s} {m:6d} x {n:6d} x {k:6d}  {ms*1e3:9.1f} us  "
              f"{rows[-1]['tflops']:6.1f} TFLOP/s", flush=True)
        del a, b, c
    return rows


def kernel_turnaround_us():
    """Device time per tiny kernel launched eagerly back to back (queued ahead, so the host is
    not what is timed), and the same under CUDA graph replay."""
    x = torch.zeros(1, device=DEV)
    eager = device_ms(lambda: x.add_(1), 500) * 1e3
    graph = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            x.add_(1)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(graph):
        for _ in range(500):
            x.add_(1)
    graphed = device_ms(graph.replay, 3) * 1e3 / 500
    return eager, graphed


def dispatch_us():
    """Host microseconds to dispatch one eager operator (the device is kept busy ahead so the
    launches never wait on it), for the operators a transformer step is made of."""
    x = torch.randn(8, 128, 384, device=DEV)
    w = torch.randn(384 * 4, 384, device=DEV)
    ln = torch.nn.LayerNorm(384, device=DEV)
    ops = {
        "add_": lambda: x.add_(1e-9),
        "linear": lambda: torch.nn.functional.linear(x, w),
        "layer_norm": lambda: ln(x),
        "gelu": lambda: torch.nn.functional.gelu(x),
        "softmax": lambda: torch.softmax(x, -1),
    }
    out = {}
    for name, op in ops.items():
        for _ in range(50):
            op()
        torch.cuda.synchronize()
        per = []
        for _ in range(5):
            torch.cuda._sleep(100_000_000)  # keep the device busy: the host is what is timed
            t0 = time.perf_counter()
            for _ in range(200):
                op()
            per.append((time.perf_counter() - t0) / 200 * 1e6)
            torch.cuda.synchronize()
        out[name] = statistics.median(per)
        print(f"dispatch {name:10s} {out[name]:6.2f} us (host, eager)", flush=True)
    return out


def copy_gbps():
    n = 1 << 30  # 2 GiB of bf16 each way
    src = torch.empty(n, device=DEV, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    ms = device_ms(lambda: dst.copy_(src), 5)
    read = device_ms(lambda: src.sum(), 5)
    return 2 * n * 2 / (ms * 1e-3) / 1e9, n * 2 / (read * 1e-3) / 1e9


def attention():
    rows = []
    f = torch.nn.functional.scaled_dot_product_attention
    for name, batch, heads, seq, dim in (("175b", 1, 12, 2048, 128), ("22b", 4, 8, 2048, 96),
                                         ("1t", 1, 20, 2048, 160), ("gpt2s", 8, 12, 1024, 64)):
        q, k, v = (torch.randn(batch, heads, seq, dim, device=DEV, dtype=DTYPE,
                               requires_grad=True) for _ in range(3))
        fwd_flops = 4.0 * batch * heads * seq * seq * dim / 2  # causal: half the scores
        fwd = device_ms(lambda: f(q, k, v, is_causal=True), 20)
        o = f(q, k, v, is_causal=True)
        g = torch.randn_like(o)
        both = device_ms(lambda: torch.autograd.grad(f(q, k, v, is_causal=True), (q, k, v), g), 10)
        bwd = both - fwd
        rows.append({"name": name, "batch": batch, "heads": heads, "seq": seq, "head_dim": dim,
                     "forward_ms": fwd, "backward_ms": bwd,
                     "forward_tflops": fwd_flops / (fwd * 1e-3) / 1e12,
                     "backward_tflops": 2.5 * fwd_flops / (bwd * 1e-3) / 1e12})
        print(f"attention {name:6s} fwd {fwd*1e3:8.1f} us {rows[-1]['forward_tflops']:6.1f} TFLOP/s"
              f"  bwd {bwd*1e3:8.1f} us {rows[-1]['backward_tflops']:6.1f} TFLOP/s", flush=True)
    return rows


def main():
    global DTYPE
    args = sys.argv[1:]
    fp32 = "--fp32" in args
    args = [a for a in args if a != "--fp32"]
    if len(args) != 1:
        sys.exit("usage: gpu-measure.py [--fp32] OUT.json")
    props = torch.cuda.get_device_properties(0)
    result = {"device": props.name, "sms": props.multi_processor_count,
              "torch": torch.__version__, "cuda": torch.version.cuda,
              "cublas_tf32": torch.backends.cuda.matmul.allow_tf32,
              "dtype": "fp32" if fp32 else "bf16"}
    print(result, flush=True)
    if fp32:
        # What differs in fp32 is the maths' rate; dispatch, kernel turnaround and HBM are the
        # bf16 run's. The attention forward a run's fp32 SDPA picks is not flash (bf16/fp16 only).
        DTYPE = torch.float32
        result["attention"] = attention()
        result["gemm"] = gemm_sweep()
        with open(args[0], "w") as f:
            json.dump(result, f, indent=1)
        return
    result["dispatch_us"] = dispatch_us()
    eager, graphed = kernel_turnaround_us()
    result["kernel_us_eager"], result["kernel_us_graph"] = eager, graphed
    print(f"kernel turnaround: {eager:.2f} us eager, {graphed:.2f} us in a CUDA graph", flush=True)
    result["copy_gbps"], result["read_gbps"] = copy_gbps()
    print(f"HBM: copy {result['copy_gbps']:.0f} GB/s, read {result['read_gbps']:.0f} GB/s", flush=True)
    result["attention"] = attention()
    result["gemm"] = gemm_sweep()
    with open(args[0], "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
