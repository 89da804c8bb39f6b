#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/train/config.h"
#include "profiling/projection/hardware_profile.h"
#include "profiling/projection/trace_replay.h"
#include "profiling/trace/trace.h"

namespace shardscope::analysis {

// A recorded run's compute priced kernel by kernel on a GPU profile (profiling/projection's GPU
// model), unit by unit as the run spanned them: "forward embeddings", "forward blocks.N",
// "forward head", "backward head", "backward blocks.N" and the "optimizer step". Each span's
// compute (its time less the waits in it) then takes the priced time when the trace is
// replayed: a span scale each. The tensor group's collectives inside a span are left to the
// replay, which prices them on the links.
struct PassPricing {
  std::vector<std::vector<profiling::ScaledSpan>> span_scales;  // per rank of the trace
  // One micro-batch of one rank, and the optimizer step: the priced time, and the host's
  // dispatch of the same ops, the larger of which a pass takes (bound by launches when the
  // dispatch is longer).
  double forward_s = 0, backward_s = 0, optimizer_s = 0;
  // The tensor group's collectives of a micro-batch, on the links: the replay's, not in the
  // spans' scales (for the reader and the tests).
  double forward_comm_s = 0, backward_comm_s = 0;
  double kernels_s = 0, dispatch_s = 0;  // forward and backward of one micro-batch
  int ops_per_micro_batch = 0;
  bool launch_bound() const { return dispatch_s > kernels_s; }
  std::string description;  // for the what-if tab and `project`: what was priced, and how
};

// A rank's gradient clip before the step (0 without optimizer.clip_grad_norm), over the
// `parameters` and `tensors` it holds before ZeRO: model-parallel ranks and ZeRO-2/3 shards clip
// in fp64 (clip_sharded_gradients; the shards are 1/dp), replicas with LibTorch's
// clip_grad_norm_ (profiling::clip_seconds).
double rank_clip_seconds(const Config& config, const profiling::HardwareProfile& hw,
                         double parameters, double tensors, int dp);

// Throws ConfigError naming strategy_options.precision when `hw` cannot price `precision`: fp32
// needs the GPU's measured fp32 GEMM and attention rates (GpuCompute::prices_fp32), and is
// priced for dense models without context parallelism (a mixture's and a ring's kernels are
// priced in bf16 only).
void check_priced_precision(const std::string& precision, const profiling::HardwareProfile& hw,
                            bool mixture_of_experts, int cp);

// Prices the run's compute in config.strategy_options.precision, which `project` sets (bf16
// unless told fp32, whatever the run recorded), checked by check_priced_precision.
// Empty when the profile has no per-kernel rates (or, for context parallelism's fp32 ring, no
// fp32 rate) or its compute is "as measured".
std::optional<PassPricing> price_recorded_passes(const profiling::Trace& trace,
                                                 const Config& config,
                                                 const profiling::HardwareProfile& hw);

}  // namespace shardscope::analysis
