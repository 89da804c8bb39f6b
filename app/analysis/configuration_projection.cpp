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
using profiling::PricedOp;
using Kind = PricedOp::Kind;

void require(bool ok, const char* field, const std::string& message) {
  if (!ok) throw ConfigError(field, message);
}

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

Layout layout_for(const Config& config, const profiling::HardwareProfile& hw) {
  // What the strategy itself refuses (cp that does not divide the world, ep without experts, a
  // schedule that cannot run this layout, ...), as a run's batch would let it divide: a replica's
  // micro-batches of one sequence each. The projection's own batch is checked below.
  // Full recompute is priced for every layout, as Megatron runs it, also where our runtime's
  // strategy does not offer it yet (tp, pp, hybrid).
  const StrategyTraits traits = strategy_traits(config.strategy);
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

std::string pass_span(pipeline::Pass pass, bool split) {
  switch (pass) {
    case pipeline::Pass::kForward:
      return std::string(profiling::kForwardPassSpan);
    case pipeline::Pass::kInput:
      return std::string(split ? profiling::kInputPassSpan : profiling::kBackwardPassSpan);
    case pipeline::Pass::kWeight:
      return std::string(profiling::kWeightPassSpan);
    case pipeline::Pass::kBackward:
      break;
  }
  return std::string(profiling::kBackwardPassSpan);
}

// The step as a trace: each pipeline rank's passes; the tensor group's collectives of a pass at
// its end, after its kernels (they block the rank, so it waits through them, and together they
// take what they take between the kernels); the activations and gradients sent between stages on
// other ranks, each to its receive; then the gradient sync and the optimizer.
profiling::Trace step_trace(const Config& config, const Layout& l,
                            const std::vector<StageCost>& costs,
                            const std::vector<std::vector<pipeline::TimedAction>>& timed,
                            const ConfigurationProjection& p, double span,
                            const DataParallelTimeline* data_parallel) {
  profiling::Trace t;
  t.run.strategy = config.strategy;
  // The job's GPUs, of which one rank a pipeline stage is drawn: its data-, tensor-, context- and
  // expert-parallel peers repeat it. On GPUs a rank each, they would run over NCCL.
  t.run.world = config.world;
  t.run.device = p.hardware;
  t.run.backend = "nccl";
  t.run.projected = profiling::RecordedProjection{p.hardware, 0};
  const bool split = pipeline::splits_backward(l.schedule);
  const std::string kind = l.pipelined ? l.schedule : "gpipe";
  for (int r = 0; r < l.pp; ++r) {
    profiling::RankTrace rank;
    rank.rank = r;
    rank.lanes = {"host", "comm"};
    t.ranks.push_back(rank);
  }
  if (data_parallel != nullptr && !l.pipelined) {
    const StageCost& c = costs.at(0);
    add_data_parallel_step(t,
                           {l.m, l.dp * l.cp, c.forward.seconds, c.input.seconds + c.weight.seconds,
                            c.weight_casts, p.optimizer_s},
                           *data_parallel);
    t.normalise();
    return t;
  }
  auto add = [&](int r, const std::string& name, profiling::Category category, double t0, double t1,
                 int micro) -> profiling::Event& {
    return add_projected_span(t, r, name, category, t0, t1, micro);
  };
  std::map<std::pair<int, int>, int64_t> sent;  // per sender and receiver: sends so far
  auto transfer = [&](int from, int to, double at, int micro) {
    const int64_t seq = sent[{from, to}]++;
    for (const auto& [r, peer, op] : {std::tuple{from, to, "send"}, std::tuple{to, from, "recv"}}) {
      profiling::Event& e =
          add(r, op, profiling::Category::kCollective, at, at + p.pipeline_transfer_s, micro);
      e.lane = profiling::kCommLane;
      e.group = t.intern("pp");
      e.seq = seq;
      e.peer = int16_t(peer);
      e.group_size = 2;
      e.bytes = p.pipeline_send_bytes;
    }
  };
  // What a pass waits for between its kernels, named for what it is: the tensor group's
  // collectives, the context ring's transfers, the experts' all_to_all.
  std::string blocking;
  const auto also = [&](const char* what) {
    blocking += (blocking.empty() ? "" : " and ") + std::string(what);
  };
  if (l.tp > 1) also("tensor-parallel collectives");
  if (l.cp > 1) also("ring attention transfers");
  if (l.ep > 1) also("expert all_to_all");
  if (blocking.empty()) blocking = "collectives";
  const char* group = l.tp > 1 ? "tp" : l.cp > 1 ? "cp" : "ep";
  const int group_size = l.tp > 1 ? l.tp : l.cp > 1 ? l.cp : std::max(1, l.ep);
  for (int r = 0; r < l.pp; ++r) {
    add(r, "step 0", profiling::Category::kStep, 0, p.step_s, -1);
    for (const auto& a : timed[r]) {
      const StageCost& c = costs[a.action.stage];
      const pipeline::Pass pass = a.action.pass;
      const double comm = c.of(pass).tensor_comm;
      const std::string name = pass_span(pass, split) + " " + std::to_string(a.action.micro) +
                               (l.v > 1 ? " stage " + std::to_string(a.action.stage) : "");
      // The stage's first forward makes the step's weight copies first.
      double start = a.start;
      if (const double casts = c.first_forward_extra(a.action); casts > 0) {
        start += casts;
        add(r, "weight casts", profiling::Category::kForward, a.start, start, a.action.micro);
      }
      add(r, name,
          pass == pipeline::Pass::kForward ? profiling::Category::kForward
                                           : profiling::Category::kBackward,
          start, a.end - comm, a.action.micro);
      if (comm > 0) {
        profiling::Event& e =
            add(r, blocking, profiling::Category::kCollective, a.end - comm, a.end, a.action.micro);
        e.lane = profiling::kCommLane;
        e.group = t.intern(group);
        e.group_size = int16_t(group_size);
        add(r, "wait " + blocking, profiling::Category::kWait, a.end - comm, a.end, a.action.micro);
      }
      // What this pass hands to a stage on another rank.
      const int stage = a.action.stage, stages = l.pp * l.v;
      const int next = pass == pipeline::Pass::kForward  ? stage + 1
                       : pass == pipeline::Pass::kWeight ? -1
                                                         : stage - 1;
      if (next >= 0 && next < stages) {
        const int to = pipeline::stage_rank(kind, next, l.pp, l.v);
        if (to != r) transfer(r, to, a.end, a.action.micro);
      }
    }
    if (p.data_comm_s > 0)
      add(r, p.data_comm_what, profiling::Category::kGradSync, span, span + p.data_comm_s, -1);
    add(r, "optimizer", profiling::Category::kOptimizer, span + p.data_comm_s, p.step_s, -1);
  }
  t.normalise();
  return t;
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

  // Activations (fp32, the residual stream) between stages: each tensor rank sends its 1/tp,
  // of the sequence with sequence parallelism, else of the whole that every tensor rank holds,
  // which the receiving stage's tensor group then gathers (TensorParallelStage::hidden_piece).
  const auto hop = profiling::group_profile(hw, 2, l.tp * l.cp * l.dp);
  const bool sp = l.memory.sequence_parallel && l.tp > 1;
  const double activation = double(l.sequences) * config.model.seq * config.model.d_model * 4;
  if (l.pp > 1) {
    p.pipeline_send_bytes = int64_t(activation / l.tp);
    p.pipeline_transfer_s =
        profiling::estimate_collective("send", p.pipeline_send_bytes, 2, hop).time_s;
    if (l.tp > 1 && !sp) {
      p.pipeline_transfer_s +=
          profiling::estimate_collective("all_gather_into", int64_t(activation), l.tp,
                                         profiling::group_profile(hw, l.tp, 1))
              .time_s;
    }
  }
  auto seconds = [&](pipeline::Pass pass, int stage) { return costs[stage].of(pass).seconds; };

  // Micro-batches that share the weights' bf16 copies: each stage's first forward makes them.
  const auto first_forward = [&](int stage) { return costs[stage].weight_casts; };
  const std::string kind = l.pipelined ? l.schedule : "gpipe";
  auto timed = pipeline::simulate_schedule(kind, l.pp, l.m, l.v, seconds, p.pipeline_transfer_s,
                                           first_forward);
  double span = 0;
  for (const auto& rank : timed) span = std::max(span, rank.back().end);
  // Later accumulation passes use the copies the first made, each after the one before.
  if (l.flushes > 1) {
    const auto later =
        pipeline::simulate_schedule(kind, l.pp, l.m, l.v, seconds, p.pipeline_transfer_s);
    double later_span = 0;
    for (const auto& rank : later) later_span = std::max(later_span, rank.back().end);
    for (int f = 1; f < l.flushes; ++f, span += later_span) {
      for (size_t r = 0; r < timed.size(); ++r) {
        for (pipeline::TimedAction a : later[r]) {
          a.action.micro += f * l.m;
          a.start += span;
          a.end += span;
          timed[r].push_back(a);
        }
      }
    }
  }

  // The busiest rank's compute and tensor communication; the rest of the span it waits.
  double busiest = -1;
  for (const auto& rank : timed) {
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
      p.pipeline_wait_s = span - busy;
      p.weight_casts_s = casts;
    }
  }
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
    p.trace = step_trace(config, l, costs, timed, p, span,
                         data_parallel.drawn ? &data_parallel.timeline : nullptr);
  }
  return p;
}

}  // namespace shardscope::analysis
