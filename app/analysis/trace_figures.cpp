#include "app/analysis/trace_figures.h"
#include "app/analysis/median.h"

#include "engine/state/recorded_config.h"
#include "profiling/metrics/step_figures.h"
#include "profiling/trace/pipeline_pass_names.h"
#include "strategies/layout/parallel_layout.h"
#include "strategies/pipeline/pipeline_schedule.h"

namespace shardscope::analysis {

namespace {

// A projected configuration's pipeline, whose drawn rank r is stage r.
std::optional<RunPipeline> projected_pipeline(const profiling::RecordedProjection& projected) {
  if (projected.pipeline_stages <= 1 || projected.micro_batches < 1) return std::nullopt;
  try {
    RunPipeline p;
    p.stages = projected.pipeline_stages;
    p.micro_batches = projected.micro_batches;
    p.schedule = projected.schedule;
    p.stages_per_rank = std::max(1, projected.stages_per_rank);
    p.formula = pipeline::bubble_formula(p.schedule, p.stages, p.micro_batches, p.stages_per_rank);
    for (int r = 0; r < p.stages; ++r) {
      p.stage_of_rank.push_back(r);
      p.stages_held.push_back(pipeline::rank_stages(p.schedule, r, p.stages, p.stages_per_rank));
    }
    return p;
  } catch (const std::exception&) {
    return std::nullopt;  // a schedule this version does not know
  }
}

}  // namespace

std::optional<RunPipeline> pipeline_of_run(const profiling::RunRecord& run) {
  const std::optional<Config> recorded = recorded_config(run);
  if (!recorded && run.projected) return projected_pipeline(*run.projected);
  if (!recorded) return std::nullopt;  // not ours, or another version's configuration
  const Config& config = *recorded;
  try {
    const ParallelLayout layout = layout_of(config);
    if (layout.pipeline <= 1) return std::nullopt;
    RunPipeline p;
    p.stages = layout.pipeline;
    p.micro_batches = pipeline_micro_batches(config, layout);
    p.schedule = config.strategy_options.schedule;
    p.formula = pipeline::bubble_formula(p.schedule, p.stages, p.micro_batches,
                                         pipeline_stages_per_rank(config));
    const int v = pipeline_stages_per_rank(config);
    p.stages_per_rank = v;
    for (int r = 0; r < config.world; ++r) {
      p.stage_of_rank.push_back(layout.coordinates(r).pipeline);
      p.stages_held.push_back(
          pipeline::rank_stages(p.schedule, p.stage_of_rank.back(), p.stages, v));
    }
    return p;
  } catch (const std::exception&) {
    // A configuration this version reads but cannot lay out: not ours to judge.
    return std::nullopt;
  }
}

nlohmann::json figures_json(const profiling::Trace& trace) {
  const profiling::RunFigures figures = profiling::run_figures(trace);
  const auto pipeline = pipeline_of_run(trace.run);
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& f : figures.ranks) {
    nlohmann::json r = {{"rank", f.rank},       {"steps", f.steps},
                        {"step_s", f.step_s},   {"exposed_comm_s", f.exposed_comm_s},
                        {"overlap", f.overlap}, {"bubble_fraction", nullptr}};
    if (pipeline) {
      r["bubble_fraction"] = f.bubble_fraction;
      if (f.rank >= 0 && f.rank < static_cast<int>(pipeline->stage_of_rank.size()))
        r["stage"] = pipeline->stage_of_rank[f.rank];
      if (f.rank >= 0 && f.rank < static_cast<int>(pipeline->stages_held.size()))
        r["stages_held"] = pipeline->stages_held[f.rank];
    }
    ranks.push_back(r);
  }
  nlohmann::json out = {{"step_s", figures.step_s}, {"ranks", ranks}, {"pipeline", nullptr}};
  if (pipeline) {
    out["pipeline"] = {{"stages", pipeline->stages},
                       {"micro_batches", pipeline->micro_batches},
                       {"schedule", pipeline->schedule},
                       {"bubble_formula", pipeline->formula}};
  }
  return out;
}

std::optional<MeasuredPasses> measured_passes(const profiling::Trace& trace) {
  // The pipeline runtime names each pass's span after the pass
  // (profiling/trace/pipeline_pass_names.h).
  std::vector<double> forward, input, weight, whole;  // seconds
  for (const auto& rank : trace.ranks) {
    for (const auto& e : rank.events) {
      const std::string& name = trace.str(e.name);
      const double seconds = (e.t1_ns - e.t0_ns) * 1e-9;
      using profiling::is_pass_span;
      if (e.category == profiling::Category::kForward &&
          is_pass_span(name, profiling::kForwardPassSpan))
        forward.push_back(seconds);
      if (e.category != profiling::Category::kBackward) continue;
      if (is_pass_span(name, profiling::kInputPassSpan)) input.push_back(seconds);
      if (is_pass_span(name, profiling::kWeightPassSpan)) weight.push_back(seconds);
      if (is_pass_span(name, profiling::kBackwardPassSpan)) whole.push_back(seconds);
    }
  }
  if (forward.empty() || (whole.empty() && input.empty())) return std::nullopt;
  MeasuredPasses p;
  p.forward_s = median(forward);
  if (!input.empty()) {
    p.input_s = median(input);
    p.weight_s = median(weight);
  } else {
    p.input_s = p.weight_s = median(whole) / 2;
  }
  return p;
}

double bubble_with_measured_passes(const RunPipeline& pipeline, const MeasuredPasses& passes) {
  return pipeline::simulated_bubble(pipeline.schedule, pipeline.stages, pipeline.micro_batches,
                                    pipeline.stages_per_rank,
                                    {passes.forward_s, passes.input_s, passes.weight_s});
}

}  // namespace shardscope::analysis
