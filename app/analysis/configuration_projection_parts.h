#pragma once

// What configuration_projection.cpp prices a step with and configuration_projection_trace.cpp
// draws it from: each stage's passes, and the layout they run on.
#include <cstdint>
#include <string>
#include <vector>

#include "app/analysis/configuration_projection.h"
#include "app/analysis/data_parallel_pricing.h"
#include "profiling/projection/memory_projection.h"
#include "profiling/projection/transformer_costs.h"
#include "profiling/trace/trace.h"
#include "strategies/pipeline/pipeline_schedule.h"

namespace shardscope::analysis::projection_detail {

using profiling::PricedOp;
using Kind = PricedOp::Kind;

// A pass of one pipeline stage: its time, and the part of it spent in the tensor group's
// collectives. The host dispatches each op (PyTorch eager) while the device runs the ones before
// it, so a block's pass takes its kernels' time or its host's, whichever is longer: small models
// are bound by the host, as they are on a GPU.
struct PassCost {
  double seconds = 0, tensor_comm = 0;
  void add(const std::vector<PricedOp>& ops, double times, double host_s) {
    seconds += times * profiling::host_or_device_seconds(ops, host_s);
    tensor_comm += times * profiling::total_seconds(ops, Kind::kTensorComm);
  }
};
struct StageCost {
  PassCost forward, input, weight;
  // Once a step, in the stage's first forward, when the micro-batches share them: the bf16 copies
  // of its Linears' weights (its blocks', and the LM head's on the last stage).
  double weight_casts = 0;
  // What `action` adds to its pass: the weight casts in the first micro-batch's forward.
  double first_forward_extra(const pipeline::Action& action) const {
    return action.pass == pipeline::Pass::kForward && action.micro == 0 ? weight_casts : 0;
  }
  // What `pass` costs: a whole backward is the input and the weight pass together.
  PassCost of(pipeline::Pass pass) const {
    switch (pass) {
      case pipeline::Pass::kForward:
        return forward;
      case pipeline::Pass::kInput:
        return input;
      case pipeline::Pass::kWeight:
        return weight;
      case pipeline::Pass::kBackward:
        break;
    }
    return {input.seconds + weight.seconds, input.tensor_comm + weight.tensor_comm};
  }
};

// What the configuration lays out, checked against the hardware.
struct Layout {
  profiling::TrainingLayout memory;
  int tp = 1, pp = 1, dp = 1, cp = 1, v = 1, m = 1;
  int ep = 0;  // expert parallelism's degree (the `ep` strategy dispatches even at 1); 0: none
  // A pipeline's accumulation passes: each runs its schedule over m micro-batches, one after the
  // other, as the runtime does (a pass a run of PipelineRuntime).
  int flushes = 1;
  int64_t global_batch = 0, sequences = 1;
  std::string schedule = "1f1b";
  bool pipelined = false;
};

// The step as a trace: each pipeline rank's passes, their tensor collectives and the activations
// between stages, then the gradient sync (drawn from `data_parallel` where given) and the
// optimizer.
profiling::Trace step_trace(const Config& config, const Layout& l,
                            const std::vector<StageCost>& costs,
                            const std::vector<std::vector<pipeline::TimedAction>>& timed,
                            const ConfigurationProjection& p, double span,
                            const DataParallelTimeline* data_parallel);

}  // namespace shardscope::analysis::projection_detail
