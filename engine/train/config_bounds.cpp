#include "engine/train/config_bounds.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <thread>

#include "engine/model/core_attention.h"
#include "engine/train/config.h"

namespace shardscope {
namespace {

std::string gigabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GB", bytes / 1e9);
  return text;
}

}  // namespace

profiling::ModelShape model_shape(const ModelConfig& m) {
  return {m.vocab,
          m.d_model,
          m.heads,
          m.layers,
          m.seq,
          m.mlp_ratio,
          m.tie_embeddings,
          m.experts,
          m.top_k,
          attention_settings(m).unfused,
          m.selective_recompute};
}

int64_t usable_memory_bytes() {
  int64_t bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  // A container's own limit (cgroup v2), when it sets one lower than the machine's.
  std::ifstream limit("/sys/fs/cgroup/memory.max");
  int64_t cgroup = 0;
  if (limit >> cgroup && cgroup > 0) bytes = std::min(bytes, cgroup);
  return bytes;
}

double estimated_run_bytes(const Config& c) {
  const profiling::ModelShape shape = model_shape(c.model);
  profiling::TrainingLayout layout;
  layout.micro_batch = c.micro_batch;
  layout.mixed_precision = false;
  layout.activation_checkpointing = c.strategy_options.activation_checkpointing;
  // Every rank as if it held the whole model: strategies that shard hold less, so this bounds
  // them all. The reference trains alongside on one device.
  return profiling::project_memory(shape, layout).total() * (c.world + (c.reference ? 1 : 0));
}

void check_config_bounds(const Config& c) {
  const int64_t global = static_cast<int64_t>(c.micro_batch) * c.world * std::max(c.grad_accum, 1);
  if (global > std::numeric_limits<int>::max()) {
    throw ConfigError("micro_batch", std::to_string(c.micro_batch) + " sequences x world " +
                                         std::to_string(c.world) + " x grad_accum " +
                                         std::to_string(c.grad_accum) +
                                         " overflows the sequences per step");
  }
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (c.threads_per_rank > static_cast<int>(4 * cores)) {
    throw ConfigError("threads_per_rank", "at most " + std::to_string(4 * cores) + " (4 x the " +
                                              std::to_string(cores) + " cores here), got " +
                                              std::to_string(c.threads_per_rank));
  }
  // Only host memory is bounded here; a GPU run's device refuses what it cannot hold by itself.
  if (c.device != "cpu") return;
  const double needed = estimated_run_bytes(c);
  const double usable = static_cast<double>(usable_memory_bytes());
  if (needed > usable) {
    profiling::TrainingLayout one_sequence;
    one_sequence.mixed_precision = false;
    const auto per_sequence = profiling::project_memory(model_shape(c.model), one_sequence);
    // Name what to change: the batch when activations dominate, else the model.
    const bool batch = per_sequence.activations * c.micro_batch > per_sequence.parameters +
                                                                      per_sequence.gradients +
                                                                      per_sequence.optimizer_state;
    throw ConfigError(batch ? "micro_batch" : "model",
                      "the run needs about " + gigabytes(needed) + " of memory (" +
                          std::to_string(c.world) + " ranks" +
                          (c.reference ? " and the reference" : "") + ") and this machine has " +
                          gigabytes(usable) + ": use a smaller " +
                          (batch ? "micro-batch or sequence" : "model (preset, d_model, layers)"));
  }
}

}  // namespace shardscope
