#include "app/analysis/data_parallel_pricing.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "app/analysis/data_parallel_step.h"
#include "engine/train/config_bounds.h"
#include "engine/train/strategy_registry.h"
#include "profiling/projection/collective_model.h"
#include "profiling/projection/memory_projection.h"
#include "profiling/projection/transformer_costs.h"
#include "strategies/data_parallel/bucket_cap.h"

namespace shardscope::analysis {
namespace {

// How the compute and a collective run beside each other on the GPU, as it measured them
// (GpuCompute::Contention) for a collective at NVLink's pace within a node. A group that crosses
// nodes (its collectives at the network's pace, moving a fraction of those bytes through each
// GPU's memory), and a GPU that measured nothing (the A100), are priced with neither slowing the
// other, as projections were until 2026-11-28: the fastest they go. How much of each unit's
// time its kernels fill goes with the unit (GroupCompute::busy).
GpuSharing gpu_sharing(const profiling::HardwareProfile& gpu,
                       const profiling::HardwareProfile& group) {
  const profiling::GpuCompute::Contention measured = gpu.gpu.contention();
  if (!measured.measured || group.nodes > 1) return {1, 1};
  return {measured.compute_rate, measured.collective_rate};
}

// ZeRO-3's parameter gathers and gradient reduce-scatters in one micro-batch, unit by unit as
// it runs them (the embeddings, each block, the head) beside the compute: what of them the
// compute does not hide; `timeline` receives the micro-batch's two streams.
double zero3_exposed_seconds(const Config& config, double param_bytes, const GroupCompute& c,
                             double reduce_bytes, int ranks,
                             const profiling::HardwareProfile& group, const GpuSharing& sharing,
                             DataParallelTimeline* timeline) {
  const profiling::ParameterTensors tensors =
      profiling::parameter_tensor_sizes(model_shape(config.model));
  const auto sum = [](const std::vector<int64_t>& elements) {
    return double(std::accumulate(elements.begin(), elements.end(), int64_t{0}));
  };
  const auto time = [&](const char* op, double elements, double bytes) {
    return elements > 0
               ? profiling::estimate_collective(op, int64_t(elements * bytes), ranks, group).time_s
               : 0.0;
  };
  const auto unit = [&](double forward, double backward, double gathered, double regathered,
                        double reduced, const profiling::KernelShare& busy) {
    return UnitWork{forward,
                    backward,
                    time("all_gather_into", gathered, param_bytes),
                    time("all_gather_into", regathered, param_bytes),
                    time("reduce_scatter_tensor", reduced, reduce_bytes),
                    busy.forward,
                    busy.backward};
  };
  // Tied, the head computes with the embeddings' unit, gathered again in forward and for the
  // head's backward, where it stays until the embeddings' backward is done; its gradients join
  // the embeddings' reduce-scatter.
  const bool tied = config.model.tie_embeddings;
  const double embeddings = sum(tensors.embeddings) + (tied ? sum(tensors.head) : 0);
  const double block = sum(tensors.block), head = tied ? embeddings : sum(tensors.head);
  std::vector<UnitWork> units;
  units.push_back(unit(c.embedding_forward, c.embedding_backward, embeddings, tied ? 0 : embeddings,
                       embeddings, c.busy.embedding));
  for (int b = 0; b < config.model.layers; ++b)
    units.push_back(unit(c.block_forward, c.block_backward, block, block, block, c.busy.block));
  units.push_back(unit(c.head_forward, c.head_backward, head, head, tied ? 0 : head, c.busy.head));
  const UnitPassTime pass =
      sharded_unit_pass(units, config.strategy_options.prefetch, &timeline->pass, sharing);
  timeline->units = true;
  timeline->what = "parameter all-gathers and gradient reduce-scatters the compute did not hide";
  if (slowed_seconds(timeline->pass.compute) > 0)
    timeline->what += ", and what sharing the GPU with it added";
  return pass.span_s - pass.compute_s;
}

// What brings every rank the `held` parameters that the strategy named `sync` stepped on their
// owners only: ZeRO-1's broadcast from each owner, ZeRO-2's all-gather of each of `buckets`
// (none: one of everything); 0 for a strategy whose ranks each step all of them.
double after_step_seconds(const std::string& sync, double held, double param_bytes,
                          const std::vector<double>& buckets, int ranks,
                          const profiling::HardwareProfile& group) {
  const double bytes = held * param_bytes;
  const auto time = [&](const char* op, double b) {
    return profiling::estimate_collective(op, int64_t(b), ranks, group).time_s;
  };
  switch (strategy_traits(sync).gradient_sync.after_step) {
    case GradientSync::AfterStep::kNothing:
      return 0;
    case GradientSync::AfterStep::kBroadcastFromOwners:
      return ranks * time("broadcast", bytes / ranks);
    case GradientSync::AfterStep::kAllGather: {
      if (buckets.empty()) return time("all_gather_into", bytes);
      double seconds = 0;
      for (double b : buckets) seconds += time("all_gather_into", b);
      return seconds;
    }
  }
  return 0;
}

// A replicated strategy's units (the embeddings, each block, the head) in forward order: each
// one's backward, and its gradients' bytes in the order backward produces them (the reverse of
// registration).
std::vector<GradientUnit> gradient_units(const Config& config, const GroupCompute& c,
                                         double grad_bytes) {
  const profiling::ParameterTensors tensors =
      profiling::parameter_tensor_sizes(model_shape(config.model));
  const auto unit = [&](double backward, const std::vector<int64_t>& elements,
                        const profiling::KernelShare& busy) {
    GradientUnit u{backward, {}, busy.backward};
    for (auto it = elements.rbegin(); it != elements.rend(); ++it)
      u.tensor_bytes.push_back(double(*it) * grad_bytes);
    return u;
  };
  std::vector<GradientUnit> units = {
      unit(c.embedding_backward, tensors.embeddings, c.busy.embedding)};
  for (int b = 0; b < config.model.layers; ++b)
    units.push_back(unit(c.block_backward, tensors.block, c.busy.block));
  units.push_back(unit(c.head_backward, tensors.head, c.busy.head));
  return units;
}

// A replicated data-parallel strategy's gradient sync in the step's last micro-batch (the others
// accumulate): bucket by bucket beside its backward, or after it, as its traits say; what runs
// past the end of backward, then what follows its optimizer's step; `timeline` receives when
// each ran, and says what in words.
double replicated_sync_seconds(const Config& config, double param_bytes, const GroupCompute& c,
                               double held, double reduce_bytes, int ranks,
                               const profiling::HardwareProfile& group, const GpuSharing& sharing,
                               DataParallelTimeline* timeline) {
  const StrategyTraits traits = strategy_traits(config.strategy);
  const GradientSync& sync = traits.gradient_sync;
  // Gradients are held as the parameters are (param_bytes an element).
  const std::vector<GradientUnit> units = gradient_units(config, c, param_bytes);
  // The buckets' cap as the strategies size them; DDP's Reducer keeps its first at 1 MiB.
  const bool default_cap = config.strategy_options.bucket_mb == 0.0;
  const double cap =
      double(bucket_cap_bytes(config.strategy_options.bucket_mb, int64_t(held * param_bytes)));
  const double first = sync.small_first_bucket && default_cap ? std::min(cap, 1024.0 * 1024) : cap;
  const std::vector<GradientBucket> buckets =
      plan_gradient_buckets(units, sync.per_parameter ? 0 : cap, sync.per_parameter ? 0 : first);
  // ZeRO-2 reduce-scatters its buckets; the others all-reduce them.
  const char* op = traits.zero_stage >= 2 ? "reduce_scatter_tensor" : "all_reduce";
  const auto collective = [&](double bytes) {
    return profiling::estimate_collective(op, int64_t(bytes / param_bytes * reduce_bytes), ranks,
                                          group)
        .time_s;
  };
  const bool overlap =
      sync.overlaps_backward && (!traits.options.overlap || config.strategy_options.overlap);
  DataParallelTimeline& t = *timeline;
  std::vector<double> bucket_bytes;
  for (const GradientBucket& b : buckets) bucket_bytes.push_back(b.bytes);
  t.after_step_s =
      after_step_seconds(config.strategy, held, param_bytes, bucket_bytes, ranks, group);
  t.after_step_op =
      sync.after_step == GradientSync::AfterStep::kAllGather ? "all_gather" : "broadcast";
  t.sync_op = traits.zero_stage >= 2 ? "reduce_scatter" : "all_reduce";
  t.sync = {};
  t.tail_s =
      gradient_sync_tail(units, buckets, overlap, collective, sync.max_in_flight, &t.sync, sharing);
  t.tail_name = overlap ? "gradient buckets still reducing after backward"
                        : "gradient buckets reduced after backward";
  // Beside a backward, the buckets and it share the GPU: the slowdown counts here too.
  t.what = t.tail_name +
           (slowed_seconds(t.sync.compute) > 0 ? ", and what sharing the GPU with it added" : "") +
           (t.after_step_s > 0 ? ", then the stepped parameters sent to every rank" : "");
  return t.tail_s + t.after_step_s;
}

}  // namespace

DataParallelComm data_parallel_comm(const Config& config, const DataParallelShape& d,
                                    const GroupCompute& c, const profiling::HardwareProfile& hw) {
  DataParallelComm out;
  const StrategyTraits traits = strategy_traits(config.strategy);
  const StrategyFamily family = traits.family;
  out.drawn = family == StrategyFamily::kDataParallel || family == StrategyFamily::kReference;
  if (d.ranks <= 1) return out;
  // Gradients in fp32 (or the reduce dtype) over the group.
  const double reduce_bytes = config.strategy_options.reduce_dtype == "bf16" ? 2 : 4;
  const auto group = profiling::group_profile(hw, d.ranks, d.tp);
  if (traits.zero_stage >= 3) {
    out.seconds =
        d.micro_batches * zero3_exposed_seconds(config, d.param_bytes, c, reduce_bytes, d.ranks,
                                                group, gpu_sharing(hw, group), &out.timeline);
  } else if (family == StrategyFamily::kDataParallel) {
    out.seconds = replicated_sync_seconds(config, d.param_bytes, c, d.held, reduce_bytes, d.ranks,
                                          group, gpu_sharing(hw, group), &out.timeline);
  } else {
    // All at once after backward, not overlapped (Megatron-LM's in 2021-22; our pipelines
    // reduce buckets during the last backward, which this leaves out: an upper bound). Under
    // expert parallelism a rank's experts average over their copies only (every ep-th rank),
    // the rest over every rank.
    out.seconds = profiling::estimate_collective(
                      "all_reduce", int64_t((d.held - d.experts) * reduce_bytes), d.ranks, group)
                      .time_s;
    const double after_step = after_step_seconds(config.strategy_options.data_parallel_sync, d.held,
                                                 d.param_bytes, {}, d.ranks, group);
    out.seconds += after_step;
    if (after_step > 0) out.what += ", then the stepped parameters sent to every rank";
    const int copies = d.ep > 0 ? d.ranks / d.ep : 1;
    if (d.experts > 0 && copies > 1) {
      out.seconds +=
          profiling::estimate_collective("all_reduce", int64_t(d.experts * reduce_bytes), copies,
                                         profiling::group_profile(hw, copies, d.ep))
              .time_s;
    }
    return out;
  }
  if (out.seconds > 0) out.what = out.timeline.what;
  out.compute_slowed_s = out.timeline.units
                             ? d.micro_batches * slowed_seconds(out.timeline.pass.compute)
                             : slowed_seconds(out.timeline.sync.compute);
  return out;
}

}  // namespace shardscope::analysis
