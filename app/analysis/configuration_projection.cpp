#include "app/analysis/configuration_projection.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <sstream>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "app/analysis/configuration_projection_parts.h"
#include "app/analysis/data_parallel_pricing.h"
#include "app/analysis/data_parallel_trace.h"
#include "app/analysis/node_placement.h"
#include "app/analysis/pass_pricing.h"
#include "engine/train/config_bounds.h"
#include "engine/train/strategy_registry.h"
#include "profiling/projection/collective_model.h"
#include "profiling/projection/memory_projection.h"
#include "profiling/projection/transformer_costs.h"
#include "profiling/trace/pipeline_pass_names.h"
#include "strategies/common/memory_formula.h"
#include "strategies/layout/parallel_layout.h"
#include "strategies/pipeline/pipeline_schedule.h"

namespace shardscope::analysis {
namespace {

using profiling::PassOps;
using projection_detail::Kind;
using projection_detail::Layout;
using projection_detail::PassCost;
using projection_detail::StageCost;
using projection_detail::step_trace;

void require(bool ok, const char* field, const std::string& message) {
  if (!ok) throw ConfigError(field, message);
}

Layout layout_for(const Config& config, const profiling::HardwareProfile& hw) {
  // What the strategy itself refuses (cp that does not divide the world, ep without experts, a
  // schedule that cannot run this layout, ...), as a run's batch would let it divide: a replica's
  // micro-batches of one sequence each. The projection's own batch is checked below.
  // Full recompute is priced for every layout, as Megatron runs it, also where our runtime's
  // strategy does not offer it yet (tp, pp, hybrid).
  const StrategyTraits traits = strategy_traits(config.strategy);
  // Accumulation passes are the projection's to walk (as_run below has one): 2e9 ran out of memory.
  require(config.grad_accum >= 1 && config.grad_accum <= kMostAccumulation, "grad_accum",
          "must be from 1 to " + std::to_string(kMostAccumulation));
  Config as_run = config;
  as_run.global_batch = 0;
  as_run.grad_accum = 1;
  as_run.micro_batch = std::max(1, config.strategy_options.micro_batches);
  if (!traits.options.activation_checkpointing)
    as_run.strategy_options.activation_checkpointing = false;
  validate_structure(as_run);
  require(traits.family == StrategyFamily::kModelParallel ||
              traits.family == StrategyFamily::kDataParallel ||
              traits.family == StrategyFamily::kContextParallel ||
              traits.family == StrategyFamily::kExpertParallel ||
              traits.family == StrategyFamily::kReference,
          "strategy",
          "projects data-parallel strategies, cp, ep and the tp / pp / hybrid layouts; " +
              config.strategy + " is " + family_name(traits.family));
  // The profile first: fp32 where it measured no fp32 rates is refused whatever the layout.
  check_priced_precision(config.strategy_options.precision, hw, false, 1);
  require(config.world <= hw.gpus(), "world",
          std::to_string(config.world) + " GPUs, but " + hw.name + " has " +
              std::to_string(hw.gpus()) + " (give --nodes N for more nodes)");
  Config one = config;
  one.micro_batch = 1;  // the batch is the projection's, below
  Layout l;
  l.memory = memory_layout(one);
  l.tp = l.memory.tp;
  l.pp = l.memory.pp;
  l.cp = l.memory.cp;
  l.dp = std::max(1, l.memory.dp / l.cp);
  if (traits.family == StrategyFamily::kExpertParallel) l.ep = std::max(1, l.memory.ep);
  require(l.cp == 1 || hw.gpu.fp32_tflops > 0, "hardware",
          hw.name +
              " has no fp32 rate (its gpu's 'fp32_tflops'), which context parallelism's "
              "ring attention computes in");
  check_priced_precision(config.strategy_options.precision, hw, config.model.experts > 0, l.cp);
  if (traits.family == StrategyFamily::kModelParallel) {
    l.pipelined = true;
    l.v = pipeline_stages_per_rank(config);
    l.m = l.memory.micro_batches;
    l.flushes = std::max(1, config.grad_accum);
    l.schedule = config.strategy_options.schedule;
  } else {
    l.m = std::max(1, config.grad_accum);
  }
  l.global_batch = config.global_batch > 0 ? config.global_batch
                                           : int64_t(config.micro_batch) * config.world *
                                                 std::max(1, config.grad_accum);
  const int64_t parts = int64_t(l.dp) * l.m * l.flushes;
  require(l.global_batch % parts == 0, "global_batch",
          std::to_string(l.global_batch) + " sequences do not divide over " + std::to_string(l.dp) +
              " replicas x " + std::to_string(l.m) + " micro-batches" +
              (l.flushes > 1 ? " x " + std::to_string(l.flushes) + " accumulation passes" : ""));
  l.sequences = l.global_batch / parts;
  l.memory.micro_batch = int(l.sequences);
  l.memory.micro_batches = l.m;
  const ModelConfig& model = config.model;
  require(l.tp <= hw.gpus_per_node, "strategy_options.tensor_parallel",
          "a tensor group of " + std::to_string(l.tp) + " spans nodes of " +
              std::to_string(hw.gpus_per_node) + " GPUs");
  require(model.heads % l.tp == 0, "model.heads",
          std::to_string(model.heads) + " heads do not divide over tp " + std::to_string(l.tp));
  require(model.vocab % l.tp == 0, "model.vocab",
          std::to_string(model.vocab) + " does not divide over tp " + std::to_string(l.tp));
  require(model.layers >= l.pp * l.v, "model.layers",
          std::to_string(model.layers) + " blocks for " + std::to_string(l.pp * l.v) + " stages");
  return l;
}

// The parameters' and gradients' bytes an element, as our strategies hold them: fp32 weights
// under bf16 compute (autocast), so 4 unless the layout is mixed precision.
double parameter_bytes(const Layout& l) {
  return l.memory.mixed_precision ? 2 : 4;
}

// The parameters of the experts an expert-parallel rank holds: E/ep of each block's, each an MLP.
double expert_parameters(const ModelConfig& model, int ep) {
  const double d = model.d_model, hidden = double(model.mlp_ratio) * d;
  return double(model.layers) * double(model.experts / ep) * (2 * d * hidden + hidden + d);
}

// Each (virtual) stage's passes for one micro-batch.
std::vector<StageCost> stage_costs(const Config& config, const Layout& l,
                                   const profiling::HardwareProfile& hw, double* layer_forward,
                                   double* layer_backward, GroupCompute* groups) {
  profiling::PassShape shape;
  shape.model = model_shape(config.model);
  shape.sequences = l.sequences;
  shape.tp = l.tp;
  shape.cp = l.cp;
  shape.ep = l.ep;
  shape.sequence_parallel = l.memory.sequence_parallel && l.tp > 1;
  shape.activation_checkpointing = l.memory.activation_checkpointing;
  shape.split_backward = pipeline::splits_backward(l.schedule);
  shape.fp32 = config.strategy_options.precision == "fp32";
  shape.weight_casts_per_step = l.memory.weight_casts_per_step && !shape.fp32;
  const auto tensor_group = profiling::group_profile(hw, l.tp, 1);
  const PassOps block = profiling::block_ops(shape, hw, tensor_group);
  const PassOps embedding = profiling::embedding_ops(shape, hw, tensor_group);
  const PassOps head = profiling::head_ops(shape, hw, tensor_group);
  // What a block's pass takes: its kernels, or its host's dispatch when that is longer.
  *layer_forward = profiling::host_or_device_seconds(block.forward, block.forward_host_s);
  const auto forward_of = [](const PassOps& ops) {
    return profiling::host_or_device_seconds(ops.forward, ops.forward_host_s);
  };
  const auto backward_of = [](const PassOps& ops) {
    return profiling::host_or_device_seconds(ops.backward_input, ops.backward_input_host_s) +
           profiling::host_or_device_seconds(ops.backward_weight, ops.backward_weight_host_s);
  };
  *layer_backward = backward_of(block);
  *groups = {forward_of(embedding),
             backward_of(embedding),
             *layer_forward,
             *layer_backward,
             forward_of(head),
             backward_of(head),
             {profiling::kernel_share(embedding), profiling::kernel_share(block),
              profiling::kernel_share(head)}};
  // Each cast takes its kernel or its dispatch, whichever is longer.
  const auto cast_seconds = [&](bool head) {
    if (!shape.weight_casts_per_step) return 0.0;
    const PassOps casts = profiling::weight_cast_ops(shape, hw, head);
    return profiling::host_or_device_seconds(casts.forward, casts.forward_host_s);
  };
  const double block_casts = cast_seconds(false), head_casts = cast_seconds(true);
  const int stages = l.pp * l.v;
  const auto blocks = stage_blocks(config.model, stages);
  std::vector<StageCost> costs(stages);
  for (int s = 0; s < stages; ++s) {
    const double n = blocks[s].second - blocks[s].first;
    costs[s].weight_casts = n * block_casts + (s == stages - 1 ? head_casts : 0);
    for (const auto& [ops, times] : {std::pair<const PassOps*, double>{&block, n},
                                     {&embedding, s == 0 ? 1.0 : 0.0},
                                     {&head, s == stages - 1 ? 1.0 : 0.0}}) {
      costs[s].forward.add(ops->forward, times, ops->forward_host_s);
      costs[s].input.add(ops->backward_input, times, ops->backward_input_host_s);
      costs[s].weight.add(ops->backward_weight, times, ops->backward_weight_host_s);
    }
  }
  return costs;
}

// Activations (fp32, the residual stream) between stages: each tensor rank sends its 1/tp, of
// the sequence with sequence parallelism, else of the whole that every tensor rank holds, which
// the receiving stage's tensor group then gathers (TensorParallelStage::hidden_piece).
void price_pipeline_hop(const Config& config, const Layout& l, const profiling::HardwareProfile& hw,
                        ConfigurationProjection& p) {
  if (l.pp <= 1) return;
  const auto hop = profiling::group_profile(hw, 2, l.tp * l.cp * l.dp);
  const double activation = double(l.sequences) * config.model.seq * config.model.d_model * 4;
  p.pipeline_send_bytes = int64_t(activation / l.tp);
  p.pipeline_transfer_s =
      profiling::estimate_collective("send", p.pipeline_send_bytes, 2, hop).time_s;
  if (l.tp > 1 && !l.memory.sequence_parallel) {
    p.pipeline_transfer_s +=
        profiling::estimate_collective("all_gather_into", int64_t(activation), l.tp,
                                       profiling::group_profile(hw, l.tp, 1))
            .time_s;
  }
}

// Every pipeline rank's passes over the step's accumulation passes, and the step's span.
struct ScheduledStep {
  std::vector<std::vector<pipeline::TimedAction>> timed;
  double span = 0;
};

ScheduledStep schedule_step(const Layout& l, const std::vector<StageCost>& costs,
                            double transfer_s) {
  auto seconds = [&](pipeline::Pass pass, int stage) { return costs[stage].of(pass).seconds; };
  // Micro-batches that share the weights' bf16 copies: each stage's first forward makes them.
  const auto first_forward = [&](int stage) { return costs[stage].weight_casts; };
  const std::string kind = l.pipelined ? l.schedule : "gpipe";
  ScheduledStep step;
  step.timed =
      pipeline::simulate_schedule(kind, l.pp, l.m, l.v, seconds, transfer_s, first_forward);
  for (const auto& rank : step.timed) step.span = std::max(step.span, rank.back().end);
  if (l.flushes <= 1) return step;
  // Later accumulation passes use the copies the first made, each after the one before.
  const auto later = pipeline::simulate_schedule(kind, l.pp, l.m, l.v, seconds, transfer_s);
  double later_span = 0;
  for (const auto& rank : later) later_span = std::max(later_span, rank.back().end);
  for (int f = 1; f < l.flushes; ++f, step.span += later_span) {
    for (size_t r = 0; r < step.timed.size(); ++r) {
      for (pipeline::TimedAction a : later[r]) {
        a.action.micro += f * l.m;
        a.start += step.span;
        a.end += step.span;
        step.timed[r].push_back(a);
      }
    }
  }
  return step;
}

// The busiest rank's compute and tensor communication; the rest of the span it waits.
void take_busiest_rank(const ScheduledStep& step, const std::vector<StageCost>& costs,
                       ConfigurationProjection& p) {
  double busiest = -1;
  for (const auto& rank : step.timed) {
    double busy = 0, comm = 0, casts = 0;
    for (const auto& a : rank) {
      busy += a.end - a.start;
      comm += costs[a.action.stage].of(a.action.pass).tensor_comm;
      casts += costs[a.action.stage].first_forward_extra(a.action);
    }
    if (busy > busiest) {
      busiest = busy;
      p.compute_s = busy - comm;
      p.tensor_comm_s = comm;
      p.pipeline_wait_s = step.span - busy;
      p.weight_casts_s = casts;
    }
  }
}

}  // namespace

ConfigurationProjection project_configuration(const Config& config, profiling::HardwareProfile hw,
                                              int nodes, bool draw) {
  hw = on_nodes(std::move(hw), nodes);
  require(hw.gpu.known(), "hardware",
          hw.name + " has no per-kernel rates (its 'gpu' object): it cannot price a kernel");
  const Layout l = layout_for(config, hw);
  ConfigurationProjection p;
  p.hardware = hw.name;
  p.precision = config.strategy_options.precision;
  p.gpus = config.world;
  p.nodes = hw.nodes;
  p.tp = l.tp, p.pp = l.pp, p.dp = l.dp, p.cp = l.cp, p.ep = l.ep, p.stages_per_rank = l.v,
  p.micro_batches = l.m;
  p.micro_batch_sequences = l.sequences;
  p.accumulation_passes = l.flushes;
  p.schedule = l.pipelined ? l.schedule : "";
  GroupCompute groups;
  const std::vector<StageCost> costs =
      stage_costs(config, l, hw, &p.layer_forward_s, &p.layer_backward_s, &groups);

  price_pipeline_hop(config, l, hw, p);
  const bool sp = l.memory.sequence_parallel && l.tp > 1;
  const ScheduledStep step = schedule_step(l, costs, p.pipeline_transfer_s);
  const double span = step.span;
  take_busiest_rank(step, costs, p);
  p.memory = profiling::project_memory(model_shape(config.model), l.memory);
  // A tensor-parallel rank holds a shard of each of its stage's tensors: as many tensors.
  const double tensors =
      double(profiling::parameter_tensors(model_shape(config.model), std::max(1, l.ep))) / l.pp;
  p.optimizer_s =
      profiling::rank_optimizer_seconds(hw, l.memory, double(p.memory.parameters_per_gpu), tensors);
  // Before the step each rank clips what it holds, if asked to.
  p.optimizer_s +=
      rank_clip_seconds(config, hw, double(p.memory.parameters_per_gpu), tensors, l.dp * l.cp);
  // Every rank of a replica's context group holds every weight and averages its gradients too.
  const DataParallelComm data_parallel = data_parallel_comm(
      config,
      {l.dp * l.cp, l.tp, l.ep, l.m, parameter_bytes(l), double(p.memory.parameters_per_gpu),
       l.ep > 0 ? expert_parameters(config.model, l.ep) : 0},
      groups, hw);
  p.data_comm_s = data_parallel.seconds;
  p.data_comm_what = data_parallel.what;
  p.data_comm_slowed_s = data_parallel.compute_slowed_s;
  if (sp) {
    // The gradients of what every tensor rank holds whole (LayerNorms, row-parallel biases, the
    // position embedding), summed over the tensor group after backward.
    p.data_comm_s +=
        profiling::estimate_collective(
            "all_reduce",
            int64_t(profiling::sequence_parallel_gradient_bytes(model_shape(config.model))), l.tp,
            profiling::group_profile(hw, l.tp, 1))
            .time_s;
  }
  p.step_s = span + p.data_comm_s + p.optimizer_s;
  const double B = double(l.global_batch), s = config.model.seq, L = config.model.layers,
               h = config.model.d_model, V = config.model.vocab;
  p.model_flops = 72.0 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h));
  p.mfu = p.model_flops / (p.step_s * config.world * hw.peak_bf16_tflops * 1e12);
  p.memory_capacity_bytes = hw.gpu_memory_gib * 1024.0 * 1024 * 1024;
  p.fits = p.memory.total() <= p.memory_capacity_bytes;

  // About the events the timeline would hold: a few a pass (and its collectives and waits); for
  // ZeRO-3 each micro-batch's intervals on both streams.
  const DataParallelTimeline& dp = data_parallel.timeline;
  const double per_micro_batch = data_parallel.drawn && dp.units
                                     ? 2.0 * (dp.pass.compute.size() + dp.pass.comm.size()) + 1
                                     : 6.0 * l.pp * l.v;
  const double events =
      per_micro_batch * l.m * l.flushes + double(dp.sync.comm.size() + 2 * dp.sync.compute.size());
  if (!draw) {
    p.undrawn = "not drawn";
  } else if (events > kMaxDrawnEvents) {
    char why[160];
    std::snprintf(why, sizeof why,
                  "its timeline would hold about %.3g events (%d micro-batches), more than the "
                  "%.0f drawn",
                  events, l.m * l.flushes, kMaxDrawnEvents);
    p.undrawn = why;
  } else {
    p.trace = step_trace(config, l, costs, step.timed, p, span,
                         data_parallel.drawn ? &data_parallel.timeline : nullptr);
  }
  return p;
}

}  // namespace shardscope::analysis
