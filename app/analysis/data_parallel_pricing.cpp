#include "app/analysis/data_parallel_pricing.h"

#include <vector>

#include "app/analysis/data_parallel_step.h"
#include "engine/train/config_bounds.h"
#include "engine/train/strategy_registry.h"
#include "profiling/projection/collective_model.h"
#include "profiling/projection/memory_projection.h"
#include "profiling/projection/transformer_costs.h"
#include "strategies/data_parallel/bucket_cap.h"

namespace shardscope::analysis {

double zero3_exposed_seconds(const Config& config, double param_bytes, const GroupCompute& c,
                             double reduce_bytes, int ranks,
                             const profiling::HardwareProfile& group,
                             DataParallelTimeline* timeline) {
  const profiling::ParameterGroups params = profiling::parameter_groups(model_shape(config.model));
  const auto time = [&](const char* op, double elements, double bytes) {
    return elements > 0
               ? profiling::estimate_collective(op, int64_t(elements * bytes), ranks, group).time_s
               : 0.0;
  };
  const auto unit = [&](double forward, double backward, double gathered, double reduced) {
    return UnitWork{forward, backward, time("all_gather_into", gathered, param_bytes),
                    time("reduce_scatter_tensor", reduced, reduce_bytes)};
  };
  // Tied, the head computes with the embeddings' unit, gathered again, and its gradients join
  // the embeddings' reduce-scatter.
  const bool tied = config.model.tie_embeddings;
  const double embeddings = double(params.embeddings) + (tied ? double(params.head) : 0);
  std::vector<UnitWork> units;
  units.push_back(unit(c.embedding_forward, c.embedding_backward, embeddings, embeddings));
  for (int b = 0; b < config.model.layers; ++b)
    units.push_back(
        unit(c.block_forward, c.block_backward, double(params.block), double(params.block)));
  units.push_back(unit(c.head_forward, c.head_backward, tied ? embeddings : double(params.head),
                       tied ? 0 : double(params.head)));
  const UnitPassTime pass = sharded_unit_pass(units, config.strategy_options.prefetch,
                                              timeline != nullptr ? &timeline->pass : nullptr);
  if (timeline != nullptr) {
    timeline->units = true;
    timeline->what = "parameter all-gathers and gradient reduce-scatters the compute did not hide";
  }
  return pass.span_s - pass.compute_s;
}

double after_step_seconds(const std::string& sync, double held, double param_bytes,
                          const Config& config, int ranks,
                          const profiling::HardwareProfile& group) {
  const double bytes = held * param_bytes;
  const auto time = [&](const char* op) {
    return [&, op](double b) {
      return profiling::estimate_collective(op, int64_t(b), ranks, group).time_s;
    };
  };
  switch (strategy_traits(sync).gradient_sync.after_step) {
    case GradientSync::AfterStep::kNothing:
      return 0;
    case GradientSync::AfterStep::kBroadcastFromOwners:
      return ranks * time("broadcast")(bytes / ranks);
    case GradientSync::AfterStep::kAllGather:
      return in_buckets(bytes,
                        double(bucket_cap_bytes(config.strategy_options.bucket_mb, int64_t(bytes))),
                        time("all_gather_into"));
  }
  return 0;
}

double replicated_sync_seconds(const Config& config, double param_bytes, const GroupCompute& c,
                               double held, double reduce_bytes, int ranks,
                               const profiling::HardwareProfile& group,
                               DataParallelTimeline* timeline) {
  const StrategyTraits traits = strategy_traits(config.strategy);
  const GradientSync& sync = traits.gradient_sync;
  const profiling::ModelShape shape = model_shape(config.model);
  const profiling::ParameterGroups params = profiling::parameter_groups(shape);
  const double grad_bytes = param_bytes;
  const int ends = 4 + (shape.tie_embeddings ? 0 : 1);  // the embeddings' two, the head's
  const int block_tensors = int((profiling::parameter_tensors(shape) - ends) / shape.layers);
  std::vector<GradientUnit> units;
  units.push_back({c.embedding_backward, double(params.embeddings) * grad_bytes, 2});
  for (int b = 0; b < config.model.layers; ++b)
    units.push_back({c.block_backward, double(params.block) * grad_bytes, block_tensors});
  units.push_back({c.head_backward, double(params.head) * grad_bytes, ends - 2});
  // ZeRO-2 reduce-scatters its buckets; the others all-reduce them.
  const char* op = traits.zero_stage >= 2 ? "reduce_scatter_tensor" : "all_reduce";
  const auto collective = [&](double bytes) {
    return profiling::estimate_collective(op, int64_t(bytes / grad_bytes * reduce_bytes), ranks,
                                          group)
        .time_s;
  };
  const bool overlap =
      sync.overlaps_backward && (!traits.options.overlap || config.strategy_options.overlap);
  const double cap =
      sync.per_parameter
          ? 0
          : double(bucket_cap_bytes(config.strategy_options.bucket_mb, int64_t(held * grad_bytes)));
  DataParallelTimeline& t = *timeline;
  t.after_step_s = after_step_seconds(config.strategy, held, param_bytes, config, ranks, group);
  t.after_step_op = traits.gradient_sync.after_step == GradientSync::AfterStep::kAllGather
                        ? "all_gather"
                        : "broadcast";
  t.sync_op = traits.zero_stage >= 2 ? "reduce_scatter" : "all_reduce";
  t.what = std::string(overlap ? "gradient buckets still reducing after backward"
                               : "gradient buckets reduced after backward") +
           (t.after_step_s > 0 ? ", then the stepped parameters sent to every rank" : "");
  t.sync.clear();
  t.tail_s = gradient_sync_tail(units, cap, overlap, collective, &t.sync);
  return t.tail_s + t.after_step_s;
}

}  // namespace shardscope::analysis
