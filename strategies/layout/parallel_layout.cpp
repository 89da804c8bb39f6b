#include "strategies/layout/parallel_layout.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "engine/model/gpt_model.h"
#include "strategies/pipeline/pipeline_schedule.h"

namespace shardscope {
namespace {

std::vector<int> ranks_where(const ParallelLayout& layout, int rank,
                             bool (*same)(const ParallelLayout::Coordinates&,
                                          const ParallelLayout::Coordinates&)) {
  const auto me = layout.coordinates(rank);
  std::vector<int> members;
  for (int r = 0; r < layout.world(); ++r) {
    if (same(layout.coordinates(r), me)) members.push_back(r);
  }
  return members;
}

void require_divides(int degree, int value, const char* field, const std::string& what,
                     const char* degree_name, const std::string& remedy = "") {
  if (value % degree != 0) {
    throw ConfigError(field, what + " " + std::to_string(value) + " does not divide by the " +
                                 degree_name + " degree " + std::to_string(degree) + remedy);
  }
}

int64_t block_parameters(const ModelConfig& m) {
  ModelConfig one = m;
  one.layers = 1;
  ModelConfig none = m;
  none.layers = 0;
  return parameter_count(one) - parameter_count(none);
}

}  // namespace

ParallelLayout::Coordinates ParallelLayout::coordinates(int rank) const {
  Coordinates at;
  at.tensor = rank % tensor;
  at.context = (rank / tensor) % context;
  at.data = (rank / (tensor * context)) % data;
  at.pipeline = rank / (tensor * context * data);
  return at;
}

int ParallelLayout::rank_of(const Coordinates& at) const {
  return ((at.pipeline * data + at.data) * context + at.context) * tensor + at.tensor;
}

std::vector<int> ParallelLayout::tensor_group(int rank) const {
  return ranks_where(*this, rank, [](const Coordinates& a, const Coordinates& b) {
    return a.pipeline == b.pipeline && a.data == b.data && a.context == b.context;
  });
}

std::vector<int> ParallelLayout::pipeline_group(int rank) const {
  return ranks_where(*this, rank, [](const Coordinates& a, const Coordinates& b) {
    return a.data == b.data && a.tensor == b.tensor && a.context == b.context;
  });
}

std::vector<int> ParallelLayout::data_group(int rank) const {
  return ranks_where(*this, rank, [](const Coordinates& a, const Coordinates& b) {
    return a.pipeline == b.pipeline && a.tensor == b.tensor && a.context == b.context;
  });
}

std::vector<int> ParallelLayout::context_group(int rank) const {
  return ranks_where(*this, rank, [](const Coordinates& a, const Coordinates& b) {
    return a.pipeline == b.pipeline && a.tensor == b.tensor && a.data == b.data;
  });
}

std::vector<int> ParallelLayout::gradient_group(int rank) const {
  return ranks_where(*this, rank, [](const Coordinates& a, const Coordinates& b) {
    return a.pipeline == b.pipeline && a.tensor == b.tensor;
  });
}

std::vector<int> ParallelLayout::model_group(int rank) const {
  return ranks_where(*this, rank, [](const Coordinates& a, const Coordinates& b) {
    return a.data == b.data && a.context == b.context;
  });
}

std::vector<int> ParallelLayout::replica_group(int rank) const {
  return ranks_where(*this, rank,
                     [](const Coordinates& a, const Coordinates& b) { return a.data == b.data; });
}

std::string ParallelLayout::describe() const {
  std::string out;
  auto add = [&](const char* name, int degree) {
    if (degree == 1) return;
    out += (out.empty() ? "" : " x ") + std::string(name) + std::to_string(degree);
  };
  add("dp", data);
  add("cp", context);
  add("tp", tensor);
  add("pp", pipeline);
  return out.empty() ? "1 rank" : out;
}

ParallelLayout layout_of(const Config& config) {
  const StrategyOptions& so = config.strategy_options;
  const bool is_tp = config.strategy == "tp", is_pp = config.strategy == "pp";
  if (is_tp && so.pipeline_parallel > 1) {
    throw ConfigError("strategy_options.pipeline_parallel",
                      "tp has no pipeline stages (use hybrid for tp x pp)");
  }
  if (is_pp && so.tensor_parallel > 1) {
    throw ConfigError("strategy_options.tensor_parallel",
                      "pp has no tensor parallelism (use hybrid for tp x pp)");
  }
  // Which dimension takes the rest of the world when it is not given.
  const char* free_field = is_tp   ? "strategy_options.tensor_parallel"
                           : is_pp ? "strategy_options.pipeline_parallel"
                                   : "strategy_options.data_parallel";
  int t = so.tensor_parallel, p = so.pipeline_parallel, d = so.data_parallel;
  const int c = std::max(1, so.context_parallel);  // never the free dimension
  int& free = is_tp ? t : is_pp ? p : d;
  auto fill = [&](int& degree, const char* field) {
    const int others = std::max(1, t) * std::max(1, p) * std::max(1, d) * c;
    if (config.world % others != 0) {
      throw ConfigError(field, "the given degrees (product " + std::to_string(others) +
                                   ") do not divide the world size " +
                                   std::to_string(config.world));
    }
    degree = config.world / others;
  };
  // The strategy's own dimension takes the rest of the world; if it was given, data
  // parallelism does.
  if (free == 0) fill(free, free_field);
  if (d == 0) fill(d, free_field);
  ParallelLayout layout;
  layout.tensor = std::max(1, t);
  layout.pipeline = std::max(1, p);
  layout.data = std::max(1, d);
  layout.context = c;
  if (layout.world() != config.world) {
    throw ConfigError(so.data_parallel > 0 ? "strategy_options.data_parallel" : free_field,
                      "degrees " + layout.describe() + " make " + std::to_string(layout.world()) +
                          " ranks, not the world size " + std::to_string(config.world));
  }
  return layout;
}

int pipeline_micro_batches(const Config& config, const ParallelLayout& layout) {
  const int m = config.strategy_options.micro_batches;
  return m > 0 ? m : layout.pipeline;
}

int pipeline_stages_per_rank(const Config& config) {
  const StrategyOptions& o = config.strategy_options;
  return o.stages_per_rank > 0 ? o.stages_per_rank : pipeline::default_stages_per_rank(o.schedule);
}

std::vector<std::pair<int, int>> stage_blocks(const ModelConfig& m, int stages) {
  // Exhaustive over cut points would grow quickly; a DP over (blocks placed, stages used) on the
  // max stage size is exact and tiny for any real model.
  const int layers = m.layers;
  const int64_t block = block_parameters(m);
  ModelConfig bare = m;
  bare.layers = 0;
  const int64_t d = m.d_model;
  const int64_t head = 2 * d + (m.tie_embeddings ? 0 : int64_t{m.vocab} * d);
  const int64_t embed = parameter_count(bare) - head;
  auto cost = [&](int first, int last, int stage) {
    int64_t c = (last - first) * block;
    if (stage == 0) c += embed;
    if (stage == stages - 1) c += head;
    return c;
  };
  // Two exact DPs over (stages used, blocks placed): the smallest possible largest stage, then,
  // among the cuts that respect it, the most even one (least sum of squared stage sizes), so
  // that stages which do not set the maximum are balanced too.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  auto solve = [&](double cap, bool minimise_max) {
    std::vector<std::vector<double>> best(stages + 1, std::vector<double>(layers + 1, kInf));
    std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(layers + 1, -1));
    best[0][0] = 0;
    for (int s = 1; s <= stages; ++s) {
      for (int b = s; b <= layers; ++b) {
        for (int a = s - 1; a < b; ++a) {
          if (best[s - 1][a] == kInf) continue;
          const double c = static_cast<double>(cost(a, b, s - 1));
          if (c > cap) continue;
          const double value = minimise_max ? std::max(best[s - 1][a], c) : best[s - 1][a] + c * c;
          if (value < best[s][b]) {
            best[s][b] = value;
            cut[s][b] = a;
          }
        }
      }
    }
    return std::make_pair(best[stages][layers], cut);
  };
  const double largest = solve(kInf, true).first;
  const auto cut = solve(largest, false).second;
  std::vector<std::pair<int, int>> out(stages);
  for (int s = stages, b = layers; s > 0; --s) {
    out[s - 1] = {cut[s][b], b};
    b = cut[s][b];
  }
  return out;
}

void validate_layout(const Config& config, const ParallelLayout& layout) {
  const ModelConfig& m = config.model;
  const int t = layout.tensor, p = layout.pipeline;
  require_divides(t, m.heads, "model.heads", "heads", "tensor-parallel");
  // Megatron pads its vocabulary to a multiple of 128 times the degree; name that size.
  const int64_t padded = (int64_t(m.vocab) + 128 * t - 1) / (128 * t) * (128 * t);
  require_divides(t, m.vocab, "model.vocab", "vocabulary", "tensor-parallel",
                  " (padded as Megatron pads it: " + std::to_string(padded) + ")");
  require_divides(t, m.d_model * m.mlp_ratio, "model.mlp_ratio", "MLP width", "tensor-parallel");
  if (config.strategy_options.sequence_parallel) {
    if (t == 1) {
      throw ConfigError("strategy_options.sequence_parallel",
                        "sequence parallelism needs a tensor-parallel degree above 1");
    }
    require_divides(t, m.seq, "model.seq", "sequence length", "tensor-parallel");
  }
  if (p > m.layers) {
    throw ConfigError("strategy_options.pipeline_parallel",
                      std::to_string(p) + " pipeline stages for " + std::to_string(m.layers) +
                          " blocks: every stage needs at least one block");
  }
  if (p > 1 && m.tie_embeddings) {
    throw ConfigError("model.tie_embeddings",
                      "tied embeddings would live on the first and the last pipeline stage; "
                      "pipeline parallelism here needs untied embeddings");
  }
  const int micro_batch = config.global_batch > 0
                              ? config.global_batch / (config.world * config.grad_accum)
                              : config.micro_batch;
  const int c = layout.context;
  if (c > 1) {
    if (m.seq % (2 * c) != 0) {
      throw ConfigError("strategy_options.context_parallel",
                        "model.seq " + std::to_string(m.seq) + " cannot be cut into 2 x " +
                            std::to_string(c) +
                            " equal chunks (each context rank holds an early and a late one)");
    }
    if (config.strategy_options.sequence_parallel) {
      throw ConfigError("strategy_options.sequence_parallel",
                        "sequence parallelism splits the sequence over the tensor group, context "
                        "parallelism over the context group: choose one");
    }
    if (config.backend == "nccl") {
      throw ConfigError("backend",
                        "context parallelism's ring runs over gloo only (its ungrouped send/recv "
                        "pairs would deadlock under nccl)");
    }
  }
  // One replica computes on the sequences of all its ranks, split into m micro-batches.
  const int sequences = micro_batch * t * p * c;
  const int micro = pipeline_micro_batches(config, layout);
  if (p == 1 && config.strategy_options.micro_batches > 1) {
    throw ConfigError("strategy_options.micro_batches",
                      "micro-batches split a pipeline; this layout has one stage");
  }
  if (sequences % micro != 0) {
    throw ConfigError("strategy_options.micro_batches",
                      std::to_string(micro) + " micro-batches do not divide the " +
                          std::to_string(sequences) +
                          " sequences a replica computes on per step (micro_batch x tp x pp x "
                          "cp)");
  }
}

}  // namespace shardscope
