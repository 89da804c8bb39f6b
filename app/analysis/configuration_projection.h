#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "engine/train/config.h"
#include "profiling/projection/hardware_profile.h"
#include "profiling/projection/memory_projection.h"
#include "profiling/trace/trace.h"

namespace shardscope::analysis {

// One optimizer step of a configuration that is never run, projected onto a hardware profile:
// each kernel of our GPT priced on the profile's GPU (profiling/projection/gpu_compute_model),
// the tensor group's collectives on its links, the pipeline stages' passes executed in the
// schedule's own order (strategies/pipeline), then the optimizer. One GPU of each pipeline
// stage stands for its tensor and data peers, which do the same work.
struct ConfigurationProjection {
  std::string hardware;
  std::string precision = "bf16";  // bf16 mixed precision (autocast), or fp32
  int gpus = 0, nodes = 1;
  int tp = 1, pp = 1, dp = 1, cp = 1, stages_per_rank = 1, micro_batches = 1;
  int ep = 0;  // expert parallelism: ranks a mixture's experts are spread over (0: none)
  int accumulation_passes = 1;        // a pipeline's flushes a step (--grad-accum)
  int64_t micro_batch_sequences = 1;  // a replica's micro-batch
  std::string schedule;
  // The step on its slowest pipeline rank, and what it spends its time on.
  double step_s = 0;
  double compute_s = 0;        // kernels: matmuls, attention, memory-bound kernels
  double tensor_comm_s = 0;    // the tensor group's collectives (blocking, between kernels)
  double pipeline_wait_s = 0;  // bubble: idle in the pipeline, transfers included
  // The data-parallel group's communication the compute does not hide: gradients (and ZeRO's
  // parameters) as the strategy sends them; `data_comm_what` says what, for text and the trace.
  double data_comm_s = 0;
  double data_comm_slowed_s = 0;  // of it: the compute running slower beside the collectives
  std::string data_comm_what;
  double optimizer_s = 0;
  // Of compute: the bf16 copies of the busiest rank's Linear weights, made once a step by each of
  // its stages' first forward when the micro-batches share them.
  double weight_casts_s = 0;
  double pipeline_transfer_s = 0;   // one activation's send between stages (on the bubble's path)
  int64_t pipeline_send_bytes = 0;  // what a rank sends a hop: its tensor rank's 1/t, fp32
  double model_flops = 0;           // Megatron's 72 B s L h^2 (1 + s/6h + V/12Lh)
  double mfu = 0;
  double layer_forward_s = 0, layer_backward_s = 0;  // one block, one micro-batch
  profiling::MemoryProjection memory;                // the busiest GPU
  double memory_capacity_bytes = 0;
  bool fits = true;
  profiling::Trace trace;  // a step's timeline: one rank per pipeline rank
  // Why `trace` is empty: not asked for, or a step of more events than are drawn.
  std::string undrawn;
};

// Throws ConfigError naming the field for what cannot be projected (a strategy that is neither
// data-parallel nor a tp/pp/hybrid layout, fp32, degrees that do not fit the hardware, a batch
// that does not divide). `draw`: also make the step's timeline (`trace`), unless it would hold
// more than kMaxDrawnEvents events (`undrawn` then says so).
ConfigurationProjection project_configuration(const Config& config, profiling::HardwareProfile hw,
                                              int nodes, bool draw = true);
// A hostile --grad-accum or --micro-batches would draw millions of passes, gigabytes of them.
inline constexpr double kMaxDrawnEvents = 4e6;

nlohmann::json projection_json(const ConfigurationProjection& p);
std::string projection_text(const ConfigurationProjection& p);

}  // namespace shardscope::analysis
