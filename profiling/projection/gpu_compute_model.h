#pragma once

#include <cstdint>
#include <string>

namespace shardscope::profiling {

// How fast one GPU runs each kind of kernel, from measurements of that GPU published with their
// source (the profile's "gpu" object names each one). Nothing here is fitted to the step times
// the projection is checked against.
struct GpuCompute {
  int sms = 0;               // streaming multiprocessors: the tiles of a GEMM run in waves of these
  double peak_tflops = 0;    // dense bf16 tensor-core peak (the MFU denominator)
  double matmul_tflops = 0;  // the most a large well-shaped bf16 GEMM achieves, measured
  // The datasheet's dense fp32 peak without tensor cores (LibTorch leaves TF32 off for matmuls):
  // what an fp32 GEMM is priced at, a bound no GEMM beats. 0: unknown (nothing in fp32 priced).
  double fp32_tflops = 0;
  // What an fp32 run computes at, measured (scripts/gpu-measure.py --fp32, TF32 off): the most a
  // large fp32 GEMM achieved, and SDPA's fp32 attention as a fraction of fp32_tflops, forward
  // and backward. 0: unmeasured, and nothing but context parallelism's ring priced in fp32.
  double fp32_matmul_tflops = 0;
  double fp32_attention_forward_fraction = 0, fp32_attention_backward_fraction = 0;
  double memory_gbps = 0;        // HBM peak, GB/s
  double memory_efficiency = 0;  // the fraction of it a streaming kernel reaches, measured
  // Flash attention's rate as a fraction of the peak, forward and backward, measured.
  double attention_forward_fraction = 0, attention_backward_fraction = 0;
  double kernel_us = 0;  // the least a kernel takes on the device, start to end of the next
  // The least a GEMM takes, measured on the smallest shapes of a sweep (a GEMM's set-up, its
  // pipeline filling and draining, its epilogue); 0: kernel_us.
  double gemm_floor_us = 0;
  // What each output tile of a bf16 GEMM spends outside its loop over k (loading its first
  // operands, writing its result), in steps of that loop: a GEMM of inner size k runs at
  // k / (k + gemm_k_overhead) of the rate its waves allow. The least-squares value over a
  // measured GEMM sweep's large GEMMs at matmul_tflops; 0: unmeasured, every k at the full rate.
  double gemm_k_overhead = 0;
  // Host time to dispatch one operator (PyTorch eager); a device waits when kernels are shorter.
  double dispatch_us = 0;
  // Of a collective started beside a GEMM on another stream, the fraction of the shorter of the
  // two that the pair hides, measured (scripts/gpu-sm-contention.py: a kernel taking SMs and
  // memory bandwidth as NCCL's channels do). Each takes SMs and bandwidth the other then lacks,
  // so it is well short of 1. 0: unmeasured, and the collective is priced unhidden.
  double collective_hidden_beside_gemm = 0;
  // The same pairs, stream by stream: the GEMMs' pace beside the collective (1 / their measured
  // slowdown) and the collective's beside the GEMMs (what it moved while they ran, over that
  // time), the medians of the pairs. 0: unmeasured; a profile with only the share above runs
  // both at 1 / (2 - share), which gives the same pairs.
  double gemm_rate_beside_collective = 0, collective_rate_beside_gemm = 0;
  // The host's time per operator of each kind, measured in C++ through LibTorch on that GPU's
  // machine (`shardscope perf --only host-ops`): a view, a kernel-launching operator without and
  // with autograd recording it, a matmul (Linear), one autograd node in backward with the one
  // kernel it launches, and AdamW's step for one parameter tensor. 0: dispatch_us stands for
  // every kernel-launching kind (see host_costs()).
  struct HostCosts {
    double view_us = 0, op_us = 0, autograd_op_us = 0, matmul_us = 0, node_us = 0,
           adamw_tensor_us = 0;
    // A bare mm, as a backward's nodes call it (optional in a profile; 0: matmul_us).
    double mm_us = 0;
  } host;
  std::string sources;  // where each figure comes from

  bool known() const { return sms > 0 && matmul_tflops > 0 && memory_gbps > 0; }
  // Whether an fp32 run's GEMMs and attention were measured, so a step in fp32 can be priced.
  bool prices_fp32() const {
    return fp32_matmul_tflops > 0 && fp32_attention_forward_fraction > 0 &&
           fp32_attention_backward_fraction > 0;
  }
  // How fast compute and a collective each run while the other runs on the GPU, measured; for a
  // GPU that measured neither these rates nor the share, none (`measured` false).
  struct Contention {
    bool measured = false;
    double compute_rate = 1, collective_rate = 1;
  };
  Contention contention() const;
  // The host costs measured, or, for a profile without them, dispatch_us for each operator that
  // launches a kernel and nothing for views and for an autograd node beyond its kernels.
  HostCosts host_costs() const;
};

// Seconds of a batched GEMM C[m x n] = A[m x k] B[k x n] in `bytes`-byte elements: the GEMM's
// floor (gemm_floor_us) plus its tiles' time. The tiles (128 x 256 down to 64 x 64, whichever
// leaves the fewest SMs idle, as cuBLAS's heuristics pick) run in waves over the SMs at the
// measured large-GEMM rate, so a GEMM whose last wave is partly empty pays for the whole wave,
// each tile for the time it spends outside its k loop (gemm_k_overhead), so a short k runs
// slower; one that moves more bytes than it can compute on in that time runs at memory speed.
double gemm_seconds(const GpuCompute& gpu, int64_t m, int64_t n, int64_t k, int64_t batch = 1,
                    int bytes = 2);
// The same GEMM in fp32 on CUDA cores, at the measured large-GEMM fp32 rate where the profile
// has it, else at the datasheet's fp32 peak (fp32_tflops > 0).
double fp32_gemm_seconds(const GpuCompute& gpu, int64_t m, int64_t n, int64_t k, int64_t batch = 1);
double gemm_flops(int64_t m, int64_t n, int64_t k, int64_t batch = 1);

// Seconds of compute of `compute_s` and a collective of `collective_s` started together on two
// streams of the GPU, each at its contended rate until the first ends, the other then alone.
double pair_seconds(double compute_s, double collective_s, const GpuCompute::Contention& c);

// Seconds of a kernel that streams `bytes` through HBM (LayerNorm, GELU, adds, the optimizer).
double memory_seconds(const GpuCompute& gpu, double bytes);

// Seconds of causal flash attention over `batch` x `heads` heads of `seq` tokens and `head_dim`
// each: forward 2 matmuls of seq x seq x head_dim, halved by the causal mask; backward 2.5 times
// the forward's FLOPs (it recomputes the scores).
// `fp32`: SDPA on fp32 tensors (no flash kernel), at the measured fp32 fractions.
double attention_seconds(const GpuCompute& gpu, int64_t batch_heads, int64_t seq, int64_t head_dim,
                         bool backward, bool fp32 = false);
double attention_flops(int64_t batch_heads, int64_t seq, int64_t head_dim, bool backward);

}  // namespace shardscope::profiling
