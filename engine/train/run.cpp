#include "engine/train/run.h"

#include <mutex>

#include <torch/cuda.h>
#include <torch/version.h>
#include <nlohmann/json.hpp>

#include "engine/comm/step_traffic.h"
#include "engine/launch/device_turns.h"
#include "engine/launch/environment.h"
#include "engine/launch/launcher.h"
#include "engine/launch/process_launcher.h"
#include "engine/launch/stop_request.h"
#include "engine/model/token_data.h"
#include "engine/state/checkpoint.h"
#include "engine/state/initial_weights.h"
#include "engine/state/weights.h"
#include "engine/train/device_speed.h"
#include "engine/train/memory_formula_hook.h"
#include "engine/train/strategy_registry.h"
#include "profiling/record/clock.h"
#include "profiling/record/device_tracer.h"
#include "profiling/trace/run_record_json.h"
#include "profiling/trace/trace_builder.h"

namespace shardscope {
namespace {

struct TrainingOutcome {
  LaunchReport launch;
  std::vector<RankResult> results;
  std::vector<profiling::DeviceActivity> device_activity;  // the rank processes' own
};

TrainingOutcome train(const Config& config, std::shared_ptr<const TokenCorpus> corpus,
                      const StepCallback& on_step, const RunCallbacks* watchers = nullptr) {
  const StrategyInfo* info = StrategyRegistry::instance().find(config.strategy);  // validated
  auto sampler = std::make_shared<const BatchSampler>(corpus, config.model.seq, config.micro_batch,
                                                      config.world, config.grad_accum, config.seed);
  LaunchSpec spec = launch_spec(config);
  if (watchers != nullptr) spec.watch_logs = watchers->watch_logs;

  TrainingOutcome outcome;
  if (config.mode == "processes") {
    auto processes = launch_rank_processes(config, on_step);
    outcome.launch = std::move(processes.launch);
    outcome.results = std::move(processes.results);
    outcome.device_activity = std::move(processes.device_activity);
    return outcome;
  }
  outcome.results.resize(config.world);
  outcome.launch = launch_rank_threads(spec, [&](RankContext& ctx) {
    ctx.config = &config;
    ctx.sampler = sampler;
    auto strategy = info->make();
    outcome.results[ctx.rank] = train_rank(ctx, *strategy, on_step);
  });
  return outcome;
}

std::string describe_failures(const LaunchReport& launch) {
  const RankFailure* root = launch.root_failure();
  std::string text = "rank " + std::to_string(root->rank) + " failed: " + root->message;
  for (size_t i = 1; i < launch.failures.size(); ++i) {
    const auto& f = launch.failures[i];
    text += "\n  then rank " + std::to_string(f.rank) + " stopped: " + f.message;
  }
  return text;
}

}  // namespace

profiling::RunRecord run_description(const Config& config) {
  profiling::RunRecord run;
  run.config_json = to_json(config).dump();
  run.strategy = config.strategy;
  run.world = config.world;
  run.mode = config.mode;
  run.device = config.device;
  run.backend = config.backend;
  run.torch = TORCH_VERSION;
  // The measuring device's speed travels with the trace: device time on another machine's
  // hardware is priced from it (the compute scale), with no calibration step.
  run.device_matmul_tflops = device_matmul_tflops(config.device);
  run.turns_drain_device = config.world > 1 && config.takes_turns() &&
                           DeviceTurns::drains_gpu(config.device.rfind("cuda", 0) == 0);
  return run;
}

std::string check_environment(Config& config) {
  const std::string choice = resolve_backend(config, static_cast<int>(torch::cuda::device_count()));
  validate(config);  // what auto resolved to may rule out a combination
  check_launch_environment(config.world);
  if (config.device != "cpu" && !torch::cuda::is_available()) {
    throw ConfigError("device",
                      "'" + config.device + "' requested but no CUDA device is available");
  }
  return choice;
}

Config reference_config(const Config& config) {
  Config ref = config;
  ref.world = 1;
  ref.strategy = StrategyRegistry::instance().reference();
  ref.micro_batch = config.global_batch_size();
  ref.global_batch = 0;
  ref.grad_accum = 1;
  ref.fault = FaultInjection{};
  ref.reference = false;
  ref.threads_per_rank = 0;
  // The reference is plain fp32 training: options that change how (not what) a strategy
  // computes are what the comparison checks.
  ref.strategy_options = StrategyOptions{};
  ref.tracing = false;       // only its weights and losses are used
  ref.contended = true;      // one rank: nothing to take turns with
  ref.checkpoint_every = 0;  // it trains from scratch, and writes nothing
  ref.checkpoint_dir.clear();
  ref.resume.clear();
  return ref;
}

namespace {

profiling::Trace trace_of(const Config& config, const LaunchReport& launch) {
  std::vector<const profiling::RankEventLog*> logs;
  for (const auto& log : launch.logs) logs.push_back(log.get());
  std::vector<std::string> failures(logs.size());
  for (const auto& f : launch.failures) {
    if (f.rank >= 0 && f.rank < static_cast<int>(failures.size())) failures[f.rank] = f.message;
  }
  return profiling::build_trace(run_description(config), logs, failures);
}

// What the run found, kept in the trace so that a viewer (`shardscope view`, the GUI) shows it
// without the run: the summary, every rank's own losses, and per parameter group how far each
// rank's (gathered) weights are from rank 0's and from the single-device reference's.
void attach_result(RunSummary& summary, const std::vector<RankResult>& results,
                   const NamedTensors* reference_weights) {
  profiling::RunResult result = run_result(summary);
  result.has_rank_detail = true;
  for (const RankResult& r : results) {
    std::vector<double> losses;
    for (const auto& step : r.steps) losses.push_back(step.local_loss);
    result.rank_losses.push_back(losses);
    // Whether its losses are losses (a pipeline stage before the last computes none and records
    // 0), so that a viewer leaves the others out of its loss chart.
    result.reports_loss.push_back(r.reports_loss);
    if (!summary.ok || r.weights.empty() || summary.weights.empty()) continue;
    profiling::WeightSyncRow row;
    row.rank = r.rank;
    auto fill = [&](std::vector<double>& values, const NamedTensors& expected) {
      const auto groups = group_deviations(r.weights, expected);
      if (result.sync_groups.empty())
        for (const auto& g : groups) result.sync_groups.push_back(g.group);
      for (const auto& g : groups) values.push_back(g.max_abs);
    };
    fill(row.vs_rank0, summary.weights);
    if (reference_weights != nullptr) fill(row.vs_reference, *reference_weights);
    result.sync_ranks.push_back(row);
  }
  // One entry per rank (its steps' counts), in rank order, when any rank routed tokens.
  bool any_routed = false;
  for (const RankResult& r : results)
    for (const auto& step : r.steps) any_routed = any_routed || !step.routed_tokens.empty();
  if (any_routed) {
    for (const RankResult& r : results) {
      auto& routed = result.routed_tokens.emplace_back();
      for (const auto& step : r.steps) routed.push_back(step.routed_tokens);
    }
  }
  summary.trace.run.result = std::move(result);
}

// What the ranks' outcome says, compared across ranks and, when config.reference is set, with
// the single-device reference trained here: everything of the summary but how it was started.
void summarise(RunSummary& summary, const Config& config, TrainingOutcome outcome,
               const std::shared_ptr<const TokenCorpus>& corpus, const RunCallbacks& callbacks,
               const TrainedReference* given = nullptr);

}  // namespace

RunSummary run_training(const Config& requested, const RunCallbacks& callbacks,
                        const TrainedReference* reference) {
  Config config = requested;
  check_environment(config);
  const int64_t t0 = profiling::now_ns();
  auto phase = [&](const std::string& what) {
    if (callbacks.on_phase) callbacks.on_phase(what);
  };
  RunSummary summary;
  if (!config.resume.empty()) {
    // Resolved once, before any rank starts: every rank then reads the same step's folder.
    const CheckpointInfo checkpoint = find_checkpoint(config.resume, &summary.resume_skipped);
    check_resumable(config, checkpoint);
    config.resume = checkpoint.directory;
    summary.resumed_from = checkpoint.directory;
    summary.resumed_step = checkpoint.step;
    if (callbacks.on_resume) callbacks.on_resume(checkpoint, summary.resume_skipped);
  }
  std::optional<CheckpointDirectoryLock> checkpoint_lock;  // until this run has ended
  if (!config.checkpoint_dir.empty()) {
    check_checkpoint_directory(config.checkpoint_dir);
    checkpoint_lock.emplace(config.checkpoint_dir);
  }
  // Read and checked once before any rank starts (a bad file is bad input); the rank threads and
  // the reference then share this read while it is held.
  std::shared_ptr<const NamedTensors> initial_weights;
  if (!config.init_weights.empty()) initial_weights = load_initial_weights(config);
  summary.config = config;
  auto corpus = TokenCorpus::load(config.data, config.model.vocab, config.seed);
  summary.data = corpus->description();
  summary.parameters = parameter_count(config.model);

  auto& device_tracer = profiling::DeviceTracer::instance();
  if (config.device != "cpu") {
    std::string why = config.tracing ? "off: --no-device-tracing" : "off: --no-tracing";
    const bool wanted = config.tracing && config.device_tracing;
    summary.device_tracing = wanted && device_tracer.enable(&why) ? "on" : why;
  }
  phase("training");
  TrainingOutcome outcome = train(config, corpus, callbacks.on_step, &callbacks);
  summarise(summary, config, std::move(outcome), corpus, callbacks, reference);
  summary.wall_s = (profiling::now_ns() - t0) * 1e-9;
  return summary;
}

RunSummary summarise_rank_folder(const Config& config, const std::string& dir,
                                 const RunCallbacks& callbacks) {
  RunSummary summary;
  summary.config = config;
  auto corpus = TokenCorpus::load(config.data, config.model.vocab, config.seed);
  summary.data = corpus->description();
  summary.parameters = parameter_count(config.model);
  auto processes = read_rank_outcomes(dir, config.world, {});
  // A worker resolves a resume itself: its first step says where it went on from.
  if (!processes.results.empty()) summary.resumed_step = processes.results[0].first_step;
  // Rank 0's steps through the callbacks, as a run shows them, before any reference trains.
  if (callbacks.on_phase) callbacks.on_phase("training");
  if (callbacks.on_step && !processes.results.empty()) {
    for (const auto& step : processes.results[0].steps) callbacks.on_step(step);
  }
  TrainingOutcome outcome{std::move(processes.launch), std::move(processes.results),
                          std::move(processes.device_activity)};
  summarise(summary, config, std::move(outcome), corpus, callbacks);
  // The ranks' own time, not this reading's: rank 0's steps, as the run's table shows them.
  for (const auto& step : summary.steps) summary.wall_s += step.step_time_s;
  return summary;
}

namespace {

void summarise(RunSummary& summary, const Config& config, TrainingOutcome outcome,
               const std::shared_ptr<const TokenCorpus>& corpus, const RunCallbacks& callbacks,
               const TrainedReference* given) {
  auto phase = [&](const std::string& what) {
    if (callbacks.on_phase) callbacks.on_phase(what);
  };
  for (int r = 0; r < config.world; ++r) {
    RankSummary rank;
    rank.rank = r;
    rank.comm_events = outcome.launch.logs[r]->snapshot();
    rank.comm_bytes_per_step = typical_bytes_per_step(traffic_per_step(rank.comm_events));
    rank.peak_allocated_bytes = outcome.launch.peak_allocated_bytes[r];
    if (static_cast<size_t>(r) < outcome.results.size()) {
      rank.device_allocator_peak_bytes = outcome.results[r].device_allocator_peak_bytes;
      rank.backward_thread = outcome.results[r].backward_thread;
    }
    const auto samples = outcome.launch.logs[r]->memory();
    profiling::logged_peak(samples, &rank.peak_breakdown);
    for (const auto& sample : samples) {
      if (sample.kind == profiling::MemoryKind::kActivations)
        rank.most_activation_bytes = std::max(rank.most_activation_bytes, sample.bytes);
    }
    if (memory_formula_hook()) {
      try {
        rank.formula_bytes = memory_formula_hook()(config, r);
      } catch (const std::exception&) {
        // A layout the formula cannot describe: the run stands, without a formula.
      }
    }
    summary.ranks.push_back(std::move(rank));
  }
  summary.backward_thread = !summary.ranks.empty();
  for (const RankSummary& r : summary.ranks)
    summary.backward_thread = summary.backward_thread && r.backward_thread.all_on_second_thread();
  summary.trace = trace_of(config, outcome.launch);
  // Threads: this process's CUPTI saw every rank. Processes: each rank process's did.
  std::vector<profiling::DeviceActivity> device = profiling::DeviceTracer::instance().collect();
  device.insert(device.end(), outcome.device_activity.begin(), outcome.device_activity.end());
  profiling::add_device_activity(summary.trace, device);
  if (!outcome.launch.ok()) {
    summary.ok = false;
    summary.failed_rank = outcome.launch.root_failure()->rank;
    summary.failure = describe_failures(outcome.launch);
    if (!config.checkpoint_dir.empty()) {
      try {  // what a resume would continue from
        summary.checkpoint = find_checkpoint(config.checkpoint_dir).directory;
      } catch (const ConfigError&) {
      }
    }
    attach_result(summary, outcome.results, nullptr);
    return;
  }

  if (outcome.results[0].checkpoint_step >= 0) {
    summary.checkpoint =
        checkpoint_step_directory(config.checkpoint_dir, outcome.results[0].checkpoint_step);
  }
  summary.stopped_by_signal = outcome.results[0].stopped_by_signal;
  // Rank processes may see Ctrl-C and the launcher's forwarded SIGTERM both: name what the
  // launcher itself was sent.
  if (summary.stopped_by_signal != 0 && stop_requested() != 0)
    summary.stopped_by_signal = stop_requested();
  summary.steps = outcome.results[0].steps;
  summary.replicated = outcome.results[0].replicated;
  summary.weights = outcome.results[0].weights;
  summary.ranks_agree = true;
  for (int r = 0; r < config.world; ++r) {
    const RankResult& result = outcome.results[r];
    summary.ranks[r].checksum = weights_checksum(result.weights);
    summary.ranks[r].weight_sum = weights_sum(result.weights);
    summary.ranks[r].memory = result.memory;
    if (r > 0) {
      summary.max_rank_delta = std::max(summary.max_rank_delta,
                                        compare_weights(result.weights, summary.weights).max_abs);
      summary.ranks_agree =
          summary.ranks_agree && summary.ranks[r].checksum == summary.ranks[0].checksum;
    }
  }

  // A stop asked for during the last step, or during the reference itself, leaves no complete
  // reference to compare with: the run is reported stopped instead.
  if (summary.stopped_by_signal == 0) summary.stopped_by_signal = stop_requested();
  std::optional<TrainingOutcome> ref;
  if (config.reference && summary.stopped_by_signal == 0) {
    phase("reference");
    ref = train(reference_config(config), corpus, {});
    if (!ref->launch.ok())
      throw std::runtime_error("reference run failed: " + describe_failures(ref->launch));
    summary.stopped_by_signal = ref->results[0].stopped_by_signal;
  }
  if (ref && summary.stopped_by_signal == 0) {
    ReferenceComparison comparison;
    comparison.deviation = compare_weights(summary.weights, ref->results[0].weights);
    // Loss by loss over the steps this run trained (a resumed run starts late).
    for (const auto& step : ref->results[0].steps) {
      if (step.step >= summary.resumed_step) comparison.losses.push_back(step.loss);
    }
    summary.reference = comparison;
    attach_result(summary, outcome.results, &ref->results[0].weights);
    return;
  }
  if (given != nullptr && !config.reference && summary.stopped_by_signal == 0 && summary.ok &&
      !summary.weights.empty()) {
    ReferenceComparison comparison;
    comparison.deviation = compare_weights(summary.weights, given->weights);
    for (size_t step = static_cast<size_t>(std::max(0, summary.resumed_step));
         step < given->losses.size(); ++step)
      comparison.losses.push_back(given->losses[step]);
    summary.reference = comparison;
    attach_result(summary, outcome.results, &given->weights);
    return;
  }
  attach_result(summary, outcome.results, nullptr);
}

}  // namespace

profiling::RunResult run_result(const RunSummary& s) {
  profiling::RunResult out;
  out.data = s.data;
  out.parameters = s.parameters;
  out.ok = s.ok;
  out.failed_rank = s.failed_rank;
  out.failure = s.failure;
  for (const auto& st : s.steps) out.steps.push_back({st.step, st.loss, st.step_time_s, st.lr});
  for (const auto& r : s.ranks) {
    profiling::RecordedRank rank;
    rank.rank = r.rank;
    rank.checksum = r.checksum;
    rank.weight_sum = r.weight_sum;
    rank.comm_calls = static_cast<int64_t>(r.comm_events.size());
    rank.comm_bytes_per_step = r.comm_bytes_per_step;
    rank.peak_allocated_bytes = r.peak_allocated_bytes;
    rank.device_allocator_peak_bytes = r.device_allocator_peak_bytes;
    rank.peak_breakdown = r.peak_breakdown;
    rank.formula_bytes = r.formula_bytes;
    rank.holdings = {r.memory.parameters, r.memory.gradients, r.memory.optimizer_state,
                     r.memory.comm_buffers, r.memory.host};
    out.ranks.push_back(rank);
  }
  out.replicated = s.replicated;
  out.ranks_agree = s.ranks_agree;
  out.max_rank_delta = s.max_rank_delta;
  if (s.reference) {
    const WeightDeviation& d = s.reference->deviation;
    out.reference =
        profiling::RecordedReference{d.max_abs, d.rel, d.worst, d.worst_rel, s.reference->losses};
  }
  if (!s.resumed_from.empty())
    out.resumed_from = profiling::RecordedResume{s.resumed_from, s.resumed_step, s.resume_skipped};
  out.checkpoint = s.checkpoint;
  out.stopped_by_signal = s.stopped_by_signal;
  out.wall_s = s.wall_s;
  return out;
}

nlohmann::json summary_to_json(const RunSummary& s) {
  nlohmann::json out = profiling::run_result_json(run_result(s));
  out["config"] = to_json(s.config);
  if (backward_thread_emulated()) out["backward_thread"] = s.backward_thread;
  return out;
}

}  // namespace shardscope
