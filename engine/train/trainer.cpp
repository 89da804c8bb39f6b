#include "engine/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "engine/comm/comm.h"
#include "engine/launch/device_turns.h"
#include "engine/launch/stop_request.h"
#include "engine/model/token_data.h"
#include "engine/state/checkpoint.h"
#include "engine/state/training_state.h"
#include "engine/train/device_allocator_peak.h"
#include "engine/train/optimizer_factory.h"
#include "profiling/record/clock.h"
#include "profiling/record/host_tracing.h"
#include "profiling/record/memory_tags.h"
#include "profiling/record/memory_tracker.h"

namespace shardscope {
namespace {

Batch to_device(const Batch& batch, const c10::Device& device) {
  if (device.is_cpu()) return batch;
  return {batch.inputs.to(device), batch.targets.to(device)};
}

// Loads the checkpoint `config.resume` names into the strategy; returns the steps it had done.
int resume(RankContext& ctx, Strategy& strategy) {
  const Config& config = *ctx.config;
  // Reading every shard and assembling the full state is not training: it stays out of the
  // rank's memory peak.
  profiling::RankMemoryTracker::Paused not_training;
  profiling::ScopedSpan span(profiling::Category::kOther, "resume from checkpoint");
  const auto checkpoint = load_checkpoint_shared(config.resume, config.model, config.seed);
  StateBinding binding;
  strategy.bind_state(binding);
  binding.load(checkpoint->state);
  return checkpoint->info.step;
}

// Hang detection that follows the model (collective_timeout_s 0): once two steps are timed, a
// collective that waits more than max(5 s, 10 x the slowest step so far) is a hang, so a hung
// rank of a tiny model is found in seconds and a large model's slow steps are not mistaken for
// one. Waits that are not a step's (checkpoints, the final gather) get the generous setup bound.
// Every rank sees the same slowest step (it rides on the step's all_gather), so all agree.
class HangTimeout {
 public:
  explicit HangTimeout(RankContext& ctx)
      : ctx_(ctx), adaptive_(ctx.config->collective_timeout_s == 0 && ctx.set_collective_timeout) {
    // A turn on a shared device is waited for as long as a collective is.
    DeviceTurns::set_wait_limit(ctx.config->collective_timeout_s > 0
                                    ? std::chrono::seconds(ctx.config->collective_timeout_s)
                                    : std::chrono::seconds(kSetupTimeoutS));
  }

  void step_timed(double slowest_rank_seconds) {
    slowest_s_ = std::max(slowest_s_, slowest_rank_seconds);
    ++timed_;
    tighten();
  }
  void relax() { apply(std::chrono::seconds(kSetupTimeoutS)); }
  void tighten() {
    if (timed_ < 2) return;
    const double seconds = std::min<double>(kSetupTimeoutS, std::max(5.0, 10.0 * slowest_s_));
    apply(std::chrono::milliseconds(static_cast<int64_t>(seconds * 1e3)));
  }

 private:
  // Every group's backend is told only when the bound changes, not on every step.
  void apply(std::chrono::milliseconds timeout) {
    if (!adaptive_ || timeout == applied_) return;
    ctx_.set_collective_timeout(timeout);
    DeviceTurns::set_wait_limit(timeout);
    applied_ = timeout;
  }

  RankContext& ctx_;
  bool adaptive_;
  double slowest_s_ = 0.0;
  int timed_ = 0;
  std::chrono::milliseconds applied_ =
      std::chrono::seconds(kSetupTimeoutS);  // what groups start with
};

// Every rank writes its shard; once all have (a barrier), rank 0 writes the manifest that makes
// the checkpoint valid, and a second barrier holds the others until it has (so no rank's next
// collective waits on rank 0's writing).
void save_checkpoint(RankContext& ctx, Strategy& strategy, int steps_done, HangTimeout& hang) {
  const Config& config = *ctx.config;
  profiling::RankMemoryTracker::Paused not_training;
  profiling::ScopedSpan span(profiling::Category::kOther, "checkpoint");
  StateBinding binding;
  strategy.bind_state(binding);
  hang.relax();
  const std::vector<StatePiece> pieces = binding.save();
  // Weights that the last step made NaN or infinite would be resumed from: no checkpoint of them.
  // (The loss of this step was finite; the next one's would not be.)
  for (const StatePiece& piece : pieces) {
    if (!torch::isfinite(piece.value).all().item<bool>()) {
      throw std::runtime_error("the weights diverged: " + piece.region.name +
                               " holds NaN or infinite values on rank " + std::to_string(ctx.rank) +
                               " after step " + std::to_string(steps_done - 1) +
                               "; no checkpoint of this step was written");
    }
  }
  write_checkpoint_shard(config.checkpoint_dir, steps_done, ctx.rank, pieces);
  ctx.comm->barrier();
  if (ctx.rank == 0) write_checkpoint_manifest(config.checkpoint_dir, steps_done, config);
  ctx.comm->barrier();
  hang.tighten();
}

// A loss that is NaN or infinite on any rank stops every rank at that step, before its record is
// kept or its checkpoint written: training on would only carry the NaN into every weight, and a
// run that passed its checks with "loss nan" would call a broken run a success. Every rank sees
// the same gathered losses, so every rank throws the same message and none waits on another.
void throw_if_any_loss_diverged(const torch::Tensor& per_rank, int step, bool checkpoints) {
  const auto rows = per_rank.accessor<double, 2>();  // on the host: read in place, every step
  for (int64_t r = 0; r < rows.size(0); ++r) {
    const double loss = rows[r][0];
    if (rows[r][2] > 0 && !std::isfinite(loss)) {
      std::ostringstream what;
      what << "the loss diverged: " << loss << " on rank " << r << " at step " << step
           << " (lower --lr, or clip gradients with --clip-grad-norm)"
           << (checkpoints ? "; no checkpoint of this step was written" : "");
      throw std::runtime_error(what.str());
    }
  }
}

// The fault a run was asked to inject, when this rank reaches its step.
void inject_fault_if_due(const Config& config, int rank, int step) {
  if (!config.fault.enabled() || config.fault.rank != rank || config.fault.step != step) return;
  // exit and hang are for rank processes (validation keeps them out of threads mode): a
  // process that vanishes mid-run, and one that never answers again.
  if (config.fault.kind == "exit") std::_Exit(3);
  // A process stopped (SIGSTOP, a debugger) while it holds the shared device's turn.
  if (config.fault.kind == "stop") std::raise(SIGSTOP);
  if (config.fault.kind == "hang") {
    // A hung rank stalls its peers only through the collectives it never joins: on its own
    // device it would not hold up theirs, so it gives the shared device's turn up.
    DeviceTurns::Release give_up_the_device;
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  throw std::runtime_error("injected fault (kind=throw) at step " + std::to_string(step));
}

// One optimizer step's forward and backward passes, gradient sync and update; returns this rank's
// loss (the mean over its micro-batches).
double run_step(RankContext& ctx, Strategy& strategy, int step, double lr) {
  using profiling::MemoryKind;
  using profiling::set_memory_phase;
  const Config& config = *ctx.config;
  profiling::RankEventLog* log = profiling::current_rank_log();
  const double scale = 1.0 / config.grad_accum;
  profiling::ScopedSpan step_span(profiling::Category::kStep, "step " + std::to_string(step));
  strategy.zero_grad();
  // The losses are read after the optimizer step, not as each micro-batch ends: reading one
  // makes the host wait for the device, and the host would then dispatch the optimizer only
  // once backward has run, where a plain loop dispatches it while backward runs.
  std::vector<torch::Tensor> losses;
  for (int micro = 0; micro < config.grad_accum; ++micro) {
    if (log) log->set_position(step, micro);
    profiling::ScopedSpan micro_span(profiling::Category::kMicroBatch,
                                     strategy.accumulation_span_name(micro));
    Batch batch = to_device(ctx.sampler->micro_batch(step, ctx.rank, micro), ctx.device);
    set_memory_phase(MemoryKind::kActivations);
    losses.push_back(
        strategy.forward_backward(batch, micro == config.grad_accum - 1, scale).detach());
    set_memory_phase(MemoryKind::kTemporaries);
  }
  if (log) log->set_position(step, -1);
  {
    profiling::ScopedSpan sync_span(profiling::Category::kGradSync, "gradient sync");
    strategy.sync_gradients();
  }
  profiling::ScopedSpan optimizer_span(profiling::Category::kOptimizer, "optimizer step");
  if (config.optimizer.clip_grad_norm > 0) strategy.clip_gradients(config.optimizer.clip_grad_norm);
  set_memory_phase(MemoryKind::kOptimizerState);
  strategy.optimizer_step(lr);
  set_memory_phase(MemoryKind::kTemporaries);
  double local_loss = 0.0;
  for (const auto& loss : losses) local_loss += loss.item<double>() * scale;
  return local_loss;
}

}  // namespace

RankResult train_rank(RankContext& ctx, Strategy& strategy, const StepCallback& on_step) {
  const Config& config = *ctx.config;
  RankResult result;
  result.rank = ctx.rank;
  const BackwardThreadCounts backward_before = backward_thread_counts();
  profiling::RankEventLog* log = profiling::current_rank_log();
  // What a phase allocates is what the block is, unless a tag says better (memory_tracker.h):
  // set-up builds parameters, forward activations, the optimizer its state; else temporaries.
  using profiling::MemoryKind;
  using profiling::set_memory_phase;
  // The allocator counts for the whole process: a witness of this rank's peak if alone in it.
  const bool own_process = config.mode == "processes" || config.world == 1;
  if (own_process) reset_device_allocator_peak(ctx.device);
  set_memory_phase(MemoryKind::kParameters);
  strategy.setup(ctx);
  set_memory_phase(MemoryKind::kTemporaries);
  result.reports_loss = strategy.reports_loss();  // known once the strategy has its layout
  const int first_step = config.resume.empty() ? 0 : resume(ctx, strategy);
  result.first_step = first_step;
  HangTimeout hang(ctx);

  for (int step = first_step; step < config.steps; ++step) {
    inject_fault_if_due(config, ctx.rank, step);
    const int64_t t0 = profiling::now_ns();
    if (log) log->set_position(step, -1);
    const double lr = learning_rate(config.optimizer, step, config.steps);
    const double local_loss = run_step(ctx, strategy, step, lr);
    const double local_time = (profiling::now_ns() - t0) * 1e-9;

    // One small all_gather gives every rank the mean loss (over the ranks that have one), the
    // slowest rank's time, and whether any rank was asked to stop: so all stop after this step.
    const double reports = strategy.reports_loss() ? 1.0 : 0.0;
    auto mine = torch::tensor(
        {local_loss * reports, local_time, reports, static_cast<double>(stop_requested())},
        torch::kDouble);
    auto all = torch::empty({4 * ctx.world}, torch::kDouble);
    ctx.comm->all_gather_into(all, mine);
    auto per_rank = all.view({ctx.world, 4});
    const int stop_signal = static_cast<int>(per_rank.select(1, 3).max().item<double>());
    throw_if_any_loss_diverged(per_rank, step, !config.checkpoint_dir.empty());
    StepRecord record;
    record.step = step;
    record.local_loss = local_loss;
    record.local_step_time_s = local_time;
    record.loss =
        per_rank.select(1, 0).sum().item<double>() / per_rank.select(1, 2).sum().item<double>();
    record.step_time_s = per_rank.select(1, 1).max().item<double>();
    record.lr = lr;
    record.routed_tokens = strategy.take_routed_tokens();
    result.steps.push_back(record);
    hang.step_timed(record.step_time_s);
    if (ctx.rank == 0 && on_step) on_step(record);

    const int done = step + 1;
    // The last step is always saved where a directory is given: a stop during the reference
    // that follows training must leave the finished training to resume from.
    const bool due = (config.checkpoint_every > 0 && done % config.checkpoint_every == 0) ||
                     done == config.steps;
    if (!config.checkpoint_dir.empty() && (due || stop_signal != 0)) {
      save_checkpoint(ctx, strategy, done, hang);
      result.checkpoint_step = done;
    }
    if (stop_signal != 0 && done < config.steps) {
      result.stopped_by_signal = stop_signal;
      break;
    }
  }
  if (log) log->set_position(-1, -1);
  hang.relax();
  if (own_process) result.device_allocator_peak_bytes = device_allocator_peak_bytes(ctx.device);
  result.backward_thread = backward_thread_counts_since(backward_before);
  {
    // Gathering the weights for the check is not training: it stays out of the rank's peak.
    profiling::RankMemoryTracker::Paused not_training;
    result.weights = strategy.full_weights();
  }
  result.replicated = strategy.replicated();
  result.memory = strategy.memory();
  return result;
}

}  // namespace shardscope
