#include "profiling/projection/gpu_compute_model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace shardscope::profiling {
namespace {

double ceil_div(double a, double b) {
  return std::ceil(a / b);
}

// The fraction of the SMs' slots over all waves that hold a tile, for the best of the tile
// shapes large bf16 GEMMs use. A tile's own padding is not counted: for a thin operand cuBLAS
// has narrower tiles, and such a GEMM is bound by memory anyway.
double wave_efficiency(const GpuCompute& gpu, int64_t m, int64_t n, int64_t batch) {
  static const int kTiles[][2] = {{128, 256}, {256, 128}, {128, 128},
                                  {128, 64},  {64, 128},  {64, 64}};
  double best = 0;
  for (const auto& tile : kTiles) {
    const double tiles = ceil_div(double(m), tile[0]) * ceil_div(double(n), tile[1]) * batch;
    best = std::max(best, tiles / (ceil_div(tiles, gpu.sms) * gpu.sms));
  }
  return best;
}

double floor_of_a_kernel(const GpuCompute& gpu) {
  return gpu.kernel_us * 1e-6;
}

double floor_of_a_gemm(const GpuCompute& gpu) {
  return gpu.gemm_floor_us > 0 ? gpu.gemm_floor_us * 1e-6 : floor_of_a_kernel(gpu);
}

}  // namespace

double gemm_flops(int64_t m, int64_t n, int64_t k, int64_t batch) {
  return 2.0 * double(m) * double(n) * double(k) * double(batch);
}

namespace {

double gemm_seconds_at(const GpuCompute& gpu, double tflops, double k_overhead, int64_t m,
                       int64_t n, int64_t k, int64_t batch, int bytes) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return 0;
  const double k_share = double(k) / (double(k) + k_overhead);
  const double compute =
      gemm_flops(m, n, k, batch) / (tflops * 1e12 * wave_efficiency(gpu, m, n, batch) * k_share);
  const double moved = double(bytes) * batch * (double(m) * k + double(k) * n + double(m) * n);
  return std::max(floor_of_a_gemm(gpu) + compute, memory_seconds(gpu, moved));
}

}  // namespace

double gemm_seconds(const GpuCompute& gpu, int64_t m, int64_t n, int64_t k, int64_t batch,
                    int bytes) {
  return gemm_seconds_at(gpu, gpu.matmul_tflops, gpu.gemm_k_overhead, m, n, k, batch, bytes);
}

double fp32_gemm_seconds(const GpuCompute& gpu, int64_t m, int64_t n, int64_t k, int64_t batch) {
  const double rate = gpu.fp32_matmul_tflops > 0 ? gpu.fp32_matmul_tflops : gpu.fp32_tflops;
  if (!(rate > 0)) throw std::logic_error("no fp32 rate in this GPU's profile");
  // The fp32 sweep's kernels (no tensor cores) were not measured for it: every k at the rate.
  return gemm_seconds_at(gpu, rate, 0, m, n, k, batch, 4);
}

GpuCompute::HostCosts GpuCompute::host_costs() const {
  if (host.op_us > 0) {
    HostCosts h = host;
    if (h.mm_us <= 0) h.mm_us = h.matmul_us;
    return h;
  }
  HostCosts h;
  h.op_us = h.autograd_op_us = h.matmul_us = h.mm_us = h.node_us = dispatch_us;
  return h;  // adamw_tensor_us 0: the optimizer's kernels at op_us each
}

double memory_seconds(const GpuCompute& gpu, double bytes) {
  if (bytes <= 0) return 0;
  return std::max(bytes / (gpu.memory_gbps * 1e9 * gpu.memory_efficiency), floor_of_a_kernel(gpu));
}

double attention_flops(int64_t batch_heads, int64_t seq, int64_t head_dim, bool backward) {
  // Q K^T and P V, each 2 s^2 d FLOPs a head; the causal mask skips half of them.
  const double forward = 4.0 * double(batch_heads) * double(seq) * double(seq) * head_dim / 2;
  return backward ? 2.5 * forward : forward;
}

double attention_seconds(const GpuCompute& gpu, int64_t batch_heads, int64_t seq, int64_t head_dim,
                         bool backward, bool fp32) {
  if (fp32 && !gpu.prices_fp32()) throw std::logic_error("no fp32 attention rate in this profile");
  const double fraction =
      fp32 ? (backward ? gpu.fp32_attention_backward_fraction : gpu.fp32_attention_forward_fraction)
           : (backward ? gpu.attention_backward_fraction : gpu.attention_forward_fraction);
  const double peak = fp32 ? gpu.fp32_tflops : gpu.peak_tflops;
  const double compute =
      attention_flops(batch_heads, seq, head_dim, backward) / (peak * 1e12 * fraction);
  return std::max(compute, floor_of_a_kernel(gpu));
}

GpuCompute::Contention GpuCompute::contention() const {
  if (gemm_rate_beside_collective > 0 && collective_rate_beside_gemm > 0)
    return {true, gemm_rate_beside_collective, collective_rate_beside_gemm};
  if (collective_hidden_beside_gemm > 0) {
    const double rate = 1 / (2 - collective_hidden_beside_gemm);
    return {true, rate, rate};
  }
  return {};
}

double pair_seconds(double compute_s, double collective_s, const GpuCompute::Contention& c) {
  // Nothing beside the other (or no finite time): one after the other.
  if (!(compute_s > 0) || !(collective_s > 0) || !std::isfinite(compute_s + collective_s))
    return std::max(0.0, compute_s) + std::max(0.0, collective_s);
  const double compute_end = compute_s / c.compute_rate,
               collective_end = collective_s / c.collective_rate;
  if (compute_end <= collective_end)
    return compute_end + (collective_s - c.collective_rate * compute_end);
  return collective_end + (compute_s - c.compute_rate * collective_end);
}

}  // namespace shardscope::profiling
