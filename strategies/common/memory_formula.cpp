#include "strategies/common/memory_formula.h"

#include <algorithm>

#include "engine/model/mixed_precision.h"
#include "engine/train/config_bounds.h"
#include "engine/train/memory_formula_hook.h"
#include "engine/train/strategy_registry.h"
#include "strategies/context/context_parallel.h"
#include "strategies/expert/expert_parallel.h"
#include "strategies/layout/parallel_layout.h"
#include "strategies/pipeline/pipeline_schedule.h"

namespace shardscope {
namespace {

// What `run --json` and the trace report as each rank's formula.
const bool registered = [] {
  set_memory_formula(memory_formula);
  return true;
}();

}  // namespace

profiling::TrainingLayout memory_layout(const Config& config) {
  const StrategyOptions& o = config.strategy_options;
  profiling::TrainingLayout layout;
  layout.mixed_precision = false;  // fp32 master weights, gradients and optimizer state
  layout.compute_bytes = o.precision == "bf16" ? 2 : 4;
  layout.activation_checkpointing = o.activation_checkpointing;
  layout.sequence_parallel = o.sequence_parallel;
  layout.prefetch = o.prefetch;
  layout.micro_batch = config.micro_batch;
  layout.dp = config.world;
  const StrategyTraits traits = strategy_traits(config.strategy);
  layout.zero = profiling::kZeroStages[std::clamp(traits.zero_stage, 0, 3)];
  if (traits.family == StrategyFamily::kModelParallel) {
    const ParallelLayout parallel = layout_of(config);
    layout.dp = parallel.data * parallel.context;  // ZeRO shards over every averaging rank
    layout.tp = parallel.tensor;
    layout.pp = parallel.pipeline;
    layout.cp = parallel.context;
    layout.micro_batches = pipeline_micro_batches(config, parallel);
    layout.schedule = o.schedule;
    // The pipeline runtime's stages share their weights' bf16 copies over a step.
    layout.weight_casts_per_step = shares_weight_casts(o);
    // A replica computes on the sequences of all its ranks, a pipeline micro-batch at a time
    // (s/cp tokens of each with context parallelism).
    layout.micro_batch =
        std::max(1, config.micro_batch * layout.tp * layout.pp * layout.cp / layout.micro_batches);
    const int sync_stage = strategy_traits(o.data_parallel_sync).zero_stage;
    if (layout.dp > 1) layout.zero = profiling::kZeroStages[std::clamp(sync_stage, 0, 3)];
  }
  if (traits.family == StrategyFamily::kExpertParallel) layout.ep = expert_parallel_degree(config);
  if (traits.family == StrategyFamily::kContextParallel) {
    // A replica's c ranks compute on all their sequences, s/c tokens of each; ZeRO shards over
    // every rank (all average gradients).
    layout.cp = context_parallel_degree(config);
    layout.micro_batch = config.micro_batch * layout.cp;
    const int sync_stage = strategy_traits(o.data_parallel_sync).zero_stage;
    layout.zero = profiling::kZeroStages[std::clamp(sync_stage, 0, 3)];
  }
  return layout;
}

profiling::MemoryCategories memory_formula(const Config& config, int rank) {
  const profiling::TrainingLayout layout = memory_layout(config);
  profiling::StageShape stage{0, config.model.layers};
  if (layout.pp > 1) {
    const ParallelLayout parallel = layout_of(config);
    stage.stage = parallel.coordinates(rank).pipeline;
    const std::string& kind = config.strategy_options.schedule;
    const int v = pipeline_stages_per_rank(config), stages = layout.pp * v;
    const auto blocks = stage_blocks(config.model, stages);
    const auto held = pipeline::rank_stages(kind, stage.stage, layout.pp, v);
    stage.blocks = 0;
    for (int s : held) stage.blocks += blocks[s].second - blocks[s].first;
    if (v > 1 || pipeline::splits_backward(kind)) {
      // What the schedule's own order keeps alive: forwards whose backward (or, split, whose
      // weight pass) has not yet run, summed over the rank's stages, in whole-rank units.
      auto holds = [&](int s) { return std::find(held.begin(), held.end(), s) != held.end(); };
      stage.holds_first = holds(0);
      stage.holds_last = holds(stages - 1);
      stage.in_flight = double(pipeline::peak_in_flight(pipeline::schedule(
                            kind, stage.stage, layout.pp, layout.micro_batches, v))) /
                        v;
    }
  }
  const auto p = profiling::project_stage_memory(model_shape(config.model), layout, stage);
  using profiling::MemoryKind;
  profiling::MemoryCategories out{};
  out[static_cast<int>(MemoryKind::kParameters)] = static_cast<int64_t>(p.parameters);
  out[static_cast<int>(MemoryKind::kGradients)] = static_cast<int64_t>(p.gradients);
  out[static_cast<int>(MemoryKind::kOptimizerState)] = static_cast<int64_t>(p.optimizer_state);
  out[static_cast<int>(MemoryKind::kActivations)] = static_cast<int64_t>(p.activations);
  return out;
}

}  // namespace shardscope
