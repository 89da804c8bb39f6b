// Whether a configuration can run: each field in its range, the fields consistent with each other,
// the strategy and its options as registered; then the defaults that depend on other fields.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "engine/model/core_attention.h"
#include "engine/model/gpt_model.h"
#include "engine/train/config.h"
#include "engine/train/config_bounds.h"
#include "engine/train/config_checks.h"
#include "engine/train/strategy_registry.h"

namespace shardscope {

using config_detail::is_cuda_device;
using config_detail::join;
using config_detail::require;

namespace {

// How many ranks, how they run, and on what device.
void validate_placement(const Config& c) {
  require(c.world >= 1, "world", "must be at least 1, got " + std::to_string(c.world));
  require(c.world <= 64, "world", "at most 64 ranks on one node, got " + std::to_string(c.world));
  // auto is resolved by finalize(); a config only validated keeps it.
  require(c.mode == "auto" || c.mode == "threads" || c.mode == "processes", "mode",
          "unknown mode '" + c.mode + "' (auto, threads, processes)");
  require(c.device == "cpu" || is_cuda_device(c.device), "device",
          "expected cpu or cuda:N, got '" + c.device + "'");
  require(c.backend == "shm" || c.backend == "gloo" || c.backend == "nccl" || c.backend == "auto",
          "backend", "unknown backend '" + c.backend + "' (shm, gloo, nccl, auto)");
  require(c.backend != "nccl" || c.device != "cpu", "backend",
          "nccl runs on GPUs only (--device cuda); use gloo on the cpu");
}

// The model, and the vocabulary its data needs.
void validate_model(const Config& c) {
  const ModelConfig& m = c.model;
  require(m.vocab >= 2, "model.vocab", "must be at least 2");
  require(m.d_model >= 1, "model.d_model", "must be positive");
  require(m.heads >= 1, "model.heads", "must be positive");
  require(m.d_model % m.heads == 0, "model.heads",
          std::to_string(m.heads) + " heads do not divide d_model " + std::to_string(m.d_model));
  require(m.layers >= 1, "model.layers", "must be positive");
  require(m.seq >= 1, "model.seq", "must be positive");
  require(m.mlp_ratio >= 1, "model.mlp_ratio", "must be positive");
  require(m.experts >= 0, "model.experts", "must not be negative (0: the dense MLP)");
  require(m.experts != 1, "model.experts", "a mixture needs at least 2 experts (0: the dense MLP)");
  require(m.experts <= 1024, "model.experts", "at most 1024, got " + std::to_string(m.experts));
  require(m.experts == 0 || (m.top_k >= 1 && m.top_k <= m.experts), "model.top_k",
          "must be between 1 and the " + std::to_string(m.experts) + " experts");
  require(m.layers <= 1024, "model.layers", "at most 1024, got " + std::to_string(m.layers));
  // Far past any model trained (a 1T GPT is 25 600 wide, 2048 long, 51 200 words), and short of
  // where a projection's sizes would overflow.
  require(m.d_model <= (1 << 20), "model.d_model",
          "at most 1048576, got " + std::to_string(m.d_model));
  require(m.seq <= (1 << 22), "model.seq", "at most 4194304, got " + std::to_string(m.seq));
  require(m.vocab <= (1 << 24), "model.vocab", "at most 16777216, got " + std::to_string(m.vocab));
  require(m.mlp_ratio <= 64, "model.mlp_ratio", "at most 64, got " + std::to_string(m.mlp_ratio));
  require(is_attention_kernel(m.attention), "model.attention",
          "unknown kernel '" + m.attention + "' (sdpa or unfused)");
  require(!attention_settings(m).unfused || c.strategy_options.context_parallel <= 1,
          "model.attention",
          "context parallelism runs its own ring attention; unfused needs context_parallel 1");
  require(!m.selective_recompute || !c.strategy_options.activation_checkpointing,
          "model.selective_recompute",
          "activation checkpointing already recomputes every whole block: choose one");
  if (!m.frozen.empty()) {
    const std::vector<std::string> names = parameter_names(m);
    for (const auto& name : m.frozen) {
      require(std::find(names.begin(), names.end(), name) != names.end(), "model.frozen",
              "no parameter named '" + name + "' (names look like " + names.front() + ", " +
                  names[std::min<size_t>(2, names.size() - 1)] + ")");
    }
    // Nothing left to train is bad input, said before anything starts (it once failed at run
    // time, exit 1, in the optimizer).
    const std::set<std::string> frozen(m.frozen.begin(), m.frozen.end());
    require(frozen.size() < names.size(), "model.frozen",
            "freezes every one of the model's " + std::to_string(names.size()) +
                " parameters: nothing would train");
  }
  require(c.data == "synthetic" || m.vocab >= 256, "model.vocab",
          "byte-level text needs a vocabulary of at least 256, got " + std::to_string(m.vocab));
}

// Steps and batches, threads, timeouts, memory and checkpoints.
void validate_training(const Config& c) {
  require(c.steps >= 1, "steps", "must be at least 1");
  require(c.micro_batch >= 1, "micro_batch", "must be at least 1");
  require(c.grad_accum >= 1, "grad_accum", "must be at least 1");
  require(c.global_batch >= 0, "global_batch", "must not be negative");
  require(c.global_batch == 0 || c.global_batch % (c.world * c.grad_accum) == 0, "global_batch",
          std::to_string(c.global_batch) + " sequences do not divide evenly over world " +
              std::to_string(c.world) + " x grad_accum " + std::to_string(c.grad_accum));
  require(c.threads_per_rank >= 0, "threads_per_rank", "must not be negative");
  require(c.collective_timeout_s >= 0, "collective_timeout_s",
          "must not be negative (0: adaptive, from the step times)");
  require(std::isfinite(c.memory_limit_mb) && c.memory_limit_mb >= 0, "memory_limit_mb",
          "must be 0 (no limit) or a positive number of MB");
  // A limit below one byte would round to 0, which means none.
  require(c.memory_limit_mb == 0 || c.memory_limit_mb * 1024 * 1024 >= 1, "memory_limit_mb",
          "must be 0 (no limit) or at least one byte's worth of MB");
  require(c.memory_limit_mb == 0 || c.device == "cpu", "memory_limit_mb",
          "simulates a device's capacity on the CPU; on a GPU the device's own limit applies");
  require(c.checkpoint_every >= 0, "checkpoint_every",
          "must not be negative (0: only when a signal stops the run)");
  require(c.checkpoint_keep >= 0, "checkpoint_keep", "must not be negative (0: keep every one)");
  require(c.checkpoint_every == 0 || !c.checkpoint_dir.empty(), "checkpoint_every",
          "needs a directory to write to (--checkpoint-dir)");
}

void validate_optimizer(const OptimizerConfig& o) {
  require(o.name == "adamw" || o.name == "sgd", "optimizer.name",
          "unknown optimizer '" + o.name + "' (adamw, sgd)");
  require(o.lr > 0 && std::isfinite(o.lr), "optimizer.lr", "must be positive and finite");
  require(o.weight_decay >= 0 && std::isfinite(o.weight_decay), "optimizer.weight_decay",
          "must not be negative");
  require(o.beta1 >= 0 && o.beta1 < 1, "optimizer.beta1", "must be in [0, 1)");
  require(o.beta2 >= 0 && o.beta2 < 1, "optimizer.beta2", "must be in [0, 1)");
  require(o.eps > 0 && std::isfinite(o.eps), "optimizer.eps", "must be positive and finite");
  require(o.momentum >= 0 && std::isfinite(o.momentum), "optimizer.momentum",
          "must not be negative");
  require(o.schedule == "constant" || o.schedule == "cosine" || o.schedule == "linear",
          "optimizer.schedule", "unknown schedule '" + o.schedule + "' (constant, cosine, linear)");
  require(o.warmup_steps >= 0, "optimizer.warmup_steps", "must not be negative");
  require(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1, "optimizer.min_lr_ratio",
          "must be in [0, 1]");
  require(o.clip_grad_norm >= 0 && std::isfinite(o.clip_grad_norm), "optimizer.clip_grad_norm",
          "must not be negative (0 = off)");
}

// What every strategy's options must be; the data-parallel sync is checked against the
// registry (validate_strategy).
void validate_strategy_options(const StrategyOptions& so) {
  require(so.bucket_mb >= 0 && std::isfinite(so.bucket_mb), "strategy_options.bucket_mb",
          "must not be negative (0 = DDP's default)");
  require(so.precision == "fp32" || so.precision == "bf16", "strategy_options.precision",
          "unknown precision '" + so.precision + "' (fp32, bf16)");
  require(so.reduce_dtype == "fp32" || so.reduce_dtype == "bf16", "strategy_options.reduce_dtype",
          "unknown reduce dtype '" + so.reduce_dtype + "' (fp32, bf16)");
  require(so.tensor_parallel >= 0, "strategy_options.tensor_parallel", "must not be negative");
  require(so.pipeline_parallel >= 0, "strategy_options.pipeline_parallel", "must not be negative");
  require(so.data_parallel >= 0, "strategy_options.data_parallel", "must not be negative");
  require(so.micro_batches >= 0, "strategy_options.micro_batches", "must not be negative");
  require(so.micro_batches <= kMostMicroBatches, "strategy_options.micro_batches",
          "at most " + std::to_string(kMostMicroBatches) + " a step");
  require(so.context_parallel >= 0, "strategy_options.context_parallel", "must not be negative");
  require(so.expert_parallel >= 0, "strategy_options.expert_parallel", "must not be negative");
  // Which schedules exist, and what each needs, is the pipeline strategies' to check.
  require(so.stages_per_rank >= 0, "strategy_options.stages_per_rank", "must not be negative");
}

void validate_fault(const Config& c) {
  if (c.fault.enabled()) {
    require(c.fault.rank < c.world, "inject_fault",
            "rank " + std::to_string(c.fault.rank) + " does not exist at world " +
                std::to_string(c.world));
    require(c.fault.kind == "throw" || c.mode == "processes", "inject_fault",
            "kind=" + c.fault.kind +
                " stops a whole process: it needs --mode processes (threads share one)");
    require(c.fault.step < c.steps, "inject_fault",
            "step " + std::to_string(c.fault.step) + " is past the last step");
  }
}

// The strategy and its data-parallel sync, as registered, then what the strategy itself checks.
void validate_strategy(const Config& c) {
  const StrategyOptions& so = c.strategy_options;
  const auto& registry = StrategyRegistry::instance();
  const StrategyInfo* strategy = registry.find(c.strategy);
  require(strategy != nullptr, "strategy",
          "unknown strategy '" + c.strategy + "' (known: " + join(registry.names()) + ")");
  const auto syncs =
      registry.names_where([](const StrategyTraits& t) { return t.data_parallel_sync; });
  require(std::find(syncs.begin(), syncs.end(), so.data_parallel_sync) != syncs.end(),
          "strategy_options.data_parallel_sync",
          "unknown data-parallel sync '" + so.data_parallel_sync + "' (" + join(syncs) + ")");
  if (strategy->validate) strategy->validate(c);
}

}  // namespace

void validate(const Config& c) {
  validate_placement(c);
  validate_model(c);
  validate_training(c);
  validate_optimizer(c.optimizer);
  validate_strategy_options(c.strategy_options);
  validate_fault(c);
  check_config_bounds(c);
  validate_strategy(c);
}

void validate_structure(const Config& c) {
  // Counts a projection also walks (`project` of a configuration too big to run): 2e9 once ran out
  // of memory, or overflowed a product in a message.
  require(c.grad_accum >= 1 && c.grad_accum <= kMostAccumulation, "grad_accum",
          "must be from 1 to " + std::to_string(kMostAccumulation));
  validate_model(c);
  validate_optimizer(c.optimizer);
  validate_strategy_options(c.strategy_options);
  validate_strategy(c);
}

void finalize(Config& config) {
  if (config.mode == "auto")
    config.mode = is_cuda_device(config.device) && config.world > 1 ? "processes" : "threads";
  validate(config);
  if (config.global_batch > 0) {
    config.micro_batch = config.global_batch / (config.world * config.grad_accum);
    if (config.micro_batch < 1) {
      throw ConfigError("global_batch", "fewer sequences than world x grad_accum");
    }
    check_config_bounds(config);  // again, for the micro-batch the global batch gave
  }
}

}  // namespace shardscope
