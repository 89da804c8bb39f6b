#include "app/analysis/pass_pricing.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include "engine/train/config_bounds.h"
#include "engine/train/strategy_registry.h"
#include "profiling/metrics/trace_metrics.h"
#include "profiling/projection/transformer_costs.h"
#include "profiling/trace/pipeline_pass_names.h"
#include "strategies/common/memory_formula.h"

namespace shardscope::analysis {
namespace {

using profiling::PricedOp;

// The ops of a pass less its collectives (the replay prices those on the links).
std::vector<PricedOp> compute_only(const std::vector<PricedOp>& ops) {
  std::vector<PricedOp> out;
  for (const auto& op : ops)
    if (op.kind != PricedOp::Kind::kTensorComm) out.push_back(op);
  return out;
}

std::vector<PricedOp> joined(const std::vector<PricedOp>& a, const std::vector<PricedOp>& b) {
  std::vector<PricedOp> out = compute_only(a);
  for (const auto& op : compute_only(b)) out.push_back(op);
  return out;
}

// Priced seconds of our GPT's units for one micro-batch: each unit's forward, its backward as one
// span ("backward blocks.3", the data-parallel runs), and its backward's input and weight halves
// (a pipeline stage's backward passes, which the runtime spans whole or split).
struct UnitPrices {
  double embedding_forward = 0, block_forward = 0, head_forward = 0;
  double block_backward = 0, head_backward = 0;  // the head's with the embedding's
  struct Halves {
    double input = 0, weight = 0;
  } block_halves, head_halves, embedding_halves;
  double optimizer = 0;
};

// What one pipeline stage holds, as its forward passes show: the units spanned inside them.
struct StageUnits {
  std::set<std::string> blocks;
  bool embeddings = false, head = false;
  double input_s(const UnitPrices& u) const {
    return double(blocks.size()) * u.block_halves.input + (head ? u.head_halves.input : 0) +
           (embeddings ? u.embedding_halves.input : 0);
  }
  double weight_s(const UnitPrices& u) const {
    return double(blocks.size()) * u.block_halves.weight + (head ? u.head_halves.weight : 0) +
           (embeddings ? u.embedding_halves.weight : 0);
  }
};

bool starts_with(const std::string& s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

bool is_unit_forward(const std::string& name) {
  return name == "forward embeddings" || name == "forward head" ||
         starts_with(name, "forward blocks.");
}

// A rank's stages (by the pass spans' " stage S", -1 where it holds one), each with the units its
// forward passes run.
std::map<int, StageUnits> stages_of(const profiling::Trace& trace,
                                    const profiling::RankTrace& rank) {
  struct Pass {
    int64_t t0, t1;
    int stage;
  };
  std::vector<Pass> forwards;
  for (const auto& e : rank.events) {
    if (e.lane != profiling::kHostLane) continue;
    const std::string name = trace.str(e.name);
    if (profiling::is_pass_span(name, profiling::kForwardPassSpan))
      forwards.push_back({e.t0_ns, e.t1_ns, profiling::pass_label(name).stage});
  }
  std::map<int, StageUnits> stages;
  for (const auto& e : rank.events) {
    if (e.lane != profiling::kHostLane) continue;
    const std::string name = trace.str(e.name);
    if (!is_unit_forward(name)) continue;
    for (const auto& pass : forwards) {
      if (e.t0_ns < pass.t0 || e.t1_ns > pass.t1) continue;
      StageUnits& units = stages[pass.stage];
      if (name == "forward embeddings")
        units.embeddings = true;
      else if (name == "forward head")
        units.head = true;
      else
        units.blocks.insert(name);
      break;
    }
  }
  return stages;
}

// The priced seconds of a host span: a unit's pass, a pipeline stage's backward (whole, or its
// input or weight half), or the optimizer step; nothing for any other span.
std::optional<double> span_seconds(const std::string& name, profiling::Category category,
                                   const UnitPrices& u, const std::map<int, StageUnits>& stages) {
  if (category == profiling::Category::kOptimizer) return u.optimizer;
  if (name == "forward embeddings") return u.embedding_forward;
  if (name == "forward head") return u.head_forward;
  if (name == "backward head") return u.head_backward;
  if (starts_with(name, "forward blocks.")) return u.block_forward;
  if (starts_with(name, "backward blocks.")) return u.block_backward;
  // Longest prefix first: the split passes begin as the whole backward does.
  for (const auto pass :
       {profiling::kInputPassSpan, profiling::kWeightPassSpan, profiling::kBackwardPassSpan}) {
    if (!profiling::is_pass_span(name, pass)) continue;
    const auto stage = stages.find(profiling::pass_label(name).stage);
    if (stage == stages.end()) return std::nullopt;  // a stage whose forward we never saw
    const double input = stage->second.input_s(u), weight = stage->second.weight_s(u);
    return pass == profiling::kInputPassSpan    ? input
           : pass == profiling::kWeightPassSpan ? weight
                                                : input + weight;
  }
  return std::nullopt;
}

// The host lane's waits (on a collective, or for a turn on a shared device), merged: not compute.
profiling::Intervals waits_of(const profiling::RankTrace& rank) {
  profiling::Intervals waits;
  for (const auto& e : rank.events)
    if (e.category == profiling::Category::kWait && e.lane == profiling::kHostLane)
      waits.push_back({e.t0_ns, e.t1_ns});
  return profiling::merged(std::move(waits));
}

}  // namespace

void check_priced_precision(const std::string& precision, const profiling::HardwareProfile& hw,
                            bool mixture_of_experts, int cp) {
  if (precision == "bf16") return;
  if (precision != "fp32")
    throw ConfigError("strategy_options.precision",
                      "must be fp32 or bf16, got '" + precision + "'");
  if (!hw.gpu.prices_fp32()) {
    throw ConfigError(
        "strategy_options.precision",
        hw.label() +
            " has no measured fp32 GEMM and attention rates (its gpu's 'fp32_matmul_tflops' and "
            "'fp32_attention_*_fraction'), so fp32 cannot be priced there: give bf16, or a "
            "profile that measured them (8xH100, 8xH200)");
  }
  if (mixture_of_experts || cp > 1) {
    throw ConfigError("strategy_options.precision",
                      "fp32 is priced for dense models without context parallelism; a mixture of "
                      "experts or a context group projects in bf16");
  }
}

double rank_clip_seconds(const Config& config, const profiling::HardwareProfile& hw,
                         double parameters, double tensors, int dp) {
  if (config.optimizer.clip_grad_norm <= 0) return 0;
  const StrategyTraits traits = strategy_traits(config.strategy);
  const bool in_fp64 = traits.family == StrategyFamily::kModelParallel || traits.zero_stage >= 2;
  const double shards = in_fp64 && traits.zero_stage >= 2 ? std::max(1, dp) : 1;
  return profiling::clip_seconds(hw, parameters / shards, tensors / shards, in_fp64);
}

namespace {

// Each unit's passes for one micro-batch of `shape`, and the rank's optimizer step.
UnitPrices unit_prices(const Config& config, const profiling::TrainingLayout& l,
                       const profiling::PassShape& shape, const profiling::HardwareProfile& hw,
                       const profiling::PassOps& embedding, const profiling::PassOps& block,
                       const profiling::PassOps& head) {
  const auto priced = [&](const std::vector<PricedOp>& ops, double host_s) {
    return profiling::host_or_device_seconds(compute_only(ops), host_s);
  };
  const auto backward_host = [](const profiling::PassOps& ops) {
    return ops.backward_input_host_s + ops.backward_weight_host_s;
  };
  const auto halves = [&](const profiling::PassOps& ops) {
    return UnitPrices::Halves{priced(ops.backward_input, ops.backward_input_host_s),
                              priced(ops.backward_weight, ops.backward_weight_host_s)};
  };
  UnitPrices u;
  u.embedding_forward = priced(embedding.forward, embedding.forward_host_s);
  u.block_forward = priced(block.forward, block.forward_host_s);
  u.head_forward = priced(head.forward, head.forward_host_s);
  u.block_backward =
      priced(joined(block.backward_input, block.backward_weight), backward_host(block));
  // The embedding's backward runs after the first block's, outside any span: priced with the
  // head's, so the micro-batch's total is whole.
  std::vector<PricedOp> head_back = joined(head.backward_input, head.backward_weight);
  for (const auto& op : joined(embedding.backward_input, embedding.backward_weight))
    head_back.push_back(op);
  u.head_backward = priced(head_back, backward_host(head) + backward_host(embedding));
  u.block_halves = halves(block);
  u.head_halves = halves(head);
  u.embedding_halves = halves(embedding);
  const int dp = std::max(1, l.dp);
  // A pipeline rank holds and steps its stages' share of the model; the layout's memory says so.
  const profiling::MemoryProjection memory = profiling::project_memory(shape.model, l);
  const double tensors =
      double(profiling::parameter_tensors(shape.model, std::max(1, shape.ep))) / std::max(1, l.pp);
  // The trainer clips inside its "optimizer step" span, before the step.
  u.optimizer =
      profiling::rank_optimizer_seconds(hw, l, double(memory.parameters_per_gpu), tensors) +
      rank_clip_seconds(config, hw, double(memory.parameters_per_gpu), tensors, dp);
  return u;
}

// The stretches of a span its host computed in: the span less the waits inside it (on the
// communication calls the span makes).
profiling::Intervals computed_stretches(const profiling::Intervals& waits, int64_t t0, int64_t t1) {
  profiling::Intervals out;
  auto it = std::lower_bound(waits.begin(), waits.end(), t0,
                             [](const auto& w, int64_t t) { return w.second <= t; });
  int64_t at = t0;
  for (; it != waits.end() && it->first < t1; ++it) {
    if (it->first > at) out.push_back({at, it->first});
    at = std::max(at, it->second);
  }
  if (t1 > at) out.push_back({at, t1});
  return out;
}

// One priced span of one rank: its priced seconds and the stretches it computed in.
struct PricedSpan {
  double seconds = 0;
  profiling::Intervals stretches;
  int64_t computed() const {
    int64_t ns = 0;
    for (const auto& [a, b] : stretches) ns += b - a;
    return ns;
  }
};

// The same unit's pass on every rank that ran it (its name, step and micro-batch), split the
// same way by its communication calls.
using SpanKey = std::tuple<std::string, int, int, size_t>;
SpanKey key_of(const profiling::Trace& trace, const profiling::Event& e, size_t stretches) {
  return {trace.str(e.name), e.step, e.micro, stretches};
}

// Each priced span of each rank's host lane, as stretches whose scales give the span its priced
// time. A span that communicates inside (a tensor-parallel block's all_reduces, an expert
// layer's all_to_alls, a ring's transfers) reaches each call a share of its priced time into it:
// the share of compute before it, pooled over the ranks that ran the same pass. Peers do the
// same work, so on a GPU they reach the call together; this machine's noise in how each rank's
// stretches measured would otherwise have one rank wait on another, in projected time, for work
// that no device does (an ep run's backward waited 0.4-1.8 ms of its 15.5 on 8xH100).
std::vector<std::vector<profiling::ScaledSpan>> span_scales_of(const profiling::Trace& trace,
                                                               const UnitPrices& u) {
  std::vector<std::vector<std::pair<SpanKey, PricedSpan>>> by_rank;
  std::map<SpanKey, std::pair<std::vector<int64_t>, int64_t>> pooled;  // stretches' ns, total
  for (const auto& rank : trace.ranks) {
    const auto waits = waits_of(rank);
    const auto stages = stages_of(trace, rank);
    auto& spans = by_rank.emplace_back();
    for (const auto& e : rank.events) {
      if (e.lane != profiling::kHostLane) continue;
      const auto seconds = span_seconds(trace.str(e.name), e.category, u, stages);
      if (!seconds || *seconds <= 0) continue;
      PricedSpan span{*seconds, computed_stretches(waits, e.t0_ns, e.t1_ns)};
      if (span.computed() <= 0) continue;
      const SpanKey key = key_of(trace, e, span.stretches.size());
      auto& [stretch_ns, total_ns] = pooled[key];
      stretch_ns.resize(span.stretches.size(), 0);
      for (size_t k = 0; k < span.stretches.size(); ++k)
        stretch_ns[k] += span.stretches[k].second - span.stretches[k].first;
      total_ns += span.computed();
      spans.emplace_back(key, std::move(span));
    }
  }
  std::vector<std::vector<profiling::ScaledSpan>> out;
  for (auto& spans : by_rank) {
    std::vector<profiling::ScaledSpan> scaled;
    for (const auto& [key, span] : spans) {
      const auto& [stretch_ns, total_ns] = pooled.at(key);
      for (size_t k = 0; k < span.stretches.size(); ++k) {
        const auto [a, b] = span.stretches[k];
        if (b <= a) continue;
        const double share = double(stretch_ns[k]) / double(total_ns);
        scaled.push_back({a, b, span.seconds * share / ((b - a) * 1e-9)});
      }
    }
    std::sort(scaled.begin(), scaled.end(),
              [](const auto& a, const auto& b) { return a.t0_ns < b.t0_ns; });
    // Priced spans do not nest; should two overlap, the later starts where all before it ended.
    std::vector<profiling::ScaledSpan> disjoint;
    int64_t covered = std::numeric_limits<int64_t>::min();
    for (auto span : scaled) {
      span.t0_ns = std::max(span.t0_ns, covered);
      if (span.t1_ns <= span.t0_ns) continue;
      covered = span.t1_ns;
      disjoint.push_back(span);
    }
    out.push_back(std::move(disjoint));
  }
  return out;
}

}  // namespace

std::optional<PassPricing> price_recorded_passes(const profiling::Trace& trace,
                                                 const Config& config,
                                                 const profiling::HardwareProfile& hw) {
  if (!hw.gpu.known() || hw.compute_as_measured) return std::nullopt;
  const StrategyTraits traits = strategy_traits(config.strategy);
  const profiling::TrainingLayout l = memory_layout(config);
  // Every strategy's ranks run whole units of our GPT: a context group's attention is a ring
  // (whose fp32 maths needs the GPU's fp32 rate), an expert-parallel rank's mixture sends its
  // tokens to the experts' ranks.
  if (l.cp > 1 && !(hw.gpu.fp32_tflops > 0)) return std::nullopt;
  const std::string& precision = config.strategy_options.precision;
  check_priced_precision(precision, hw, config.model.experts > 0, l.cp);
  profiling::PassShape shape;
  shape.fp32 = precision == "fp32";
  shape.model = model_shape(config.model);
  // A tensor, context or pipeline group shares its replica's sequences, in its micro-batches, as
  // the layouts run them: the layout's micro-batch.
  shape.sequences = std::max(1, l.micro_batch);
  shape.tp = l.tp;
  shape.cp = std::max(1, l.cp);
  shape.ep = traits.family == StrategyFamily::kExpertParallel ? std::max(1, l.ep) : 0;
  shape.sequence_parallel = l.sequence_parallel && l.tp > 1;
  shape.activation_checkpointing = l.activation_checkpointing;
  const auto group = profiling::group_profile(hw, l.tp, 1);
  const profiling::PassOps block = profiling::block_ops(shape, hw, group);
  const profiling::PassOps embedding = profiling::embedding_ops(shape, hw, group);
  const profiling::PassOps head = profiling::head_ops(shape, hw, group);
  const UnitPrices u = unit_prices(config, l, shape, hw, embedding, block, head);

  PassPricing p;
  const double layers = config.model.layers;
  p.forward_s = u.embedding_forward + layers * u.block_forward + u.head_forward;
  p.backward_s = layers * u.block_backward + u.head_backward;
  const auto comm = [](const std::vector<PricedOp>& ops) {
    return profiling::total_seconds(ops, PricedOp::Kind::kTensorComm);
  };
  p.forward_comm_s = comm(embedding.forward) + layers * comm(block.forward) + comm(head.forward);
  for (const auto* ops : {&embedding, &head})
    p.backward_comm_s += comm(ops->backward_input) + comm(ops->backward_weight);
  p.backward_comm_s += layers * (comm(block.backward_input) + comm(block.backward_weight));
  p.optimizer_s = u.optimizer;
  for (const auto* ops : {&embedding, &block, &head}) {
    const double times = ops == &block ? layers : 1.0;
    for (const auto* pass : {&ops->forward, &ops->backward_input, &ops->backward_weight}) {
      const auto compute = compute_only(*pass);
      p.kernels_s += times * profiling::total_seconds(compute);
      p.ops_per_micro_batch += int(times * double(compute.size()));
    }
    p.dispatch_s +=
        times * (ops->forward_host_s + ops->backward_input_host_s + ops->backward_weight_host_s);
  }
  p.span_scales = span_scales_of(trace, u);
  char text[400];
  std::snprintf(text, sizeof text,
                "compute priced kernel by kernel on %s's GPU (%s kernels): a micro-batch of %lld "
                "sequences is %d ops, %.2f ms of kernels and %.2f ms of the host dispatching its "
                "operators and autograd nodes (%.1f us a kernel-launching operator), so it is "
                "bound by %s: forward %.2f ms, backward %.2f ms; the optimizer step %.2f ms",
                hw.name.c_str(), shape.fp32 ? "fp32" : "bf16",
                static_cast<long long>(shape.sequences), p.ops_per_micro_batch, p.kernels_s * 1e3,
                p.dispatch_s * 1e3, hw.gpu.host_costs().autograd_op_us,
                p.launch_bound() ? "launches" : "its kernels", p.forward_s * 1e3,
                p.backward_s * 1e3, p.optimizer_s * 1e3);
  p.description = text;
  return p;
}

}  // namespace shardscope::analysis
