#include "app/analysis/expert_load.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "engine/state/recorded_config.h"
#include "engine/train/config.h"
#include "engine/train/strategy_registry.h"

namespace shardscope::analysis {
namespace {

double busiest_over_mean(const std::vector<int64_t>& load) {
  if (load.empty()) return 0;
  const double total = std::accumulate(load.begin(), load.end(), 0.0);
  if (total <= 0) return 0;
  return double(*std::max_element(load.begin(), load.end())) / (total / double(load.size()));
}

}  // namespace

// Counts from a file are clamped: a hostile one could otherwise overflow the sums.
constexpr int64_t kMostTokens = int64_t{1} << 40;

ExpertLoad expert_load(const profiling::Trace& trace, int step, int layer) {
  ExpertLoad out;
  std::optional<Config> config = recorded_config(trace.run);
  if (config) {
    try {
      finalize(*config);  // the bounds every run had: what a hand-edited trace may not keep
    } catch (const std::exception& e) {
      out.problem =
          std::string("This trace's configuration is not one a run could have: ") + e.what();
      return out;
    }
  }
  if (!config || config->model.experts == 0) {
    out.problem =
        "This run's model has no experts (--experts E --top-k k makes its MLPs a "
        "mixture of experts).";
    return out;
  }
  if (!trace.run.result || trace.run.result->routed_tokens.empty()) {
    out.problem =
        "This trace records no routing (a run still going, or one recorded before "
        "routing was kept in traces).";
    return out;
  }
  const auto& routed = trace.run.result->routed_tokens;
  out.experts = config->model.experts;
  out.layers = config->model.layers;
  out.top_k = config->model.top_k;
  out.ranks = static_cast<int>(std::min<size_t>(routed.size(), config->world));
  out.steps = static_cast<int>(routed.front().size());
  if (strategy_traits(config->strategy).family == StrategyFamily::kExpertParallel) {
    const int ep = config->strategy_options.expert_parallel;
    out.expert_parallel = ep > 0 ? ep : config->world;
  }
  const int E = out.experts;
  out.sent.assign(out.ranks, std::vector<int64_t>(E, 0));
  out.per_expert.assign(E, 0);
  std::vector<int64_t> tokens_of(out.ranks, 0);
  for (int r = 0; r < out.ranks; ++r) {
    for (int s = 0; s < static_cast<int>(routed[r].size()); ++s) {
      if (step >= 0 && s != step) continue;
      const auto& counts = routed[r][s];
      if (counts.size() != static_cast<size_t>(out.layers) * E) continue;  // not ours to read
      for (int l = 0; l < out.layers; ++l) {
        if (layer >= 0 && l != layer) continue;
        for (int e = 0; e < E; ++e) {
          const int64_t n =
              std::clamp<int64_t>(counts[static_cast<size_t>(l) * E + e], 0, kMostTokens);
          out.sent[r][e] += n;
          out.per_expert[e] += n;
          tokens_of[r] += n;
        }
      }
    }
  }
  out.expert_imbalance = busiest_over_mean(out.per_expert);
  if (out.expert_parallel > 0 && E % out.expert_parallel == 0) {
    const int e = out.expert_parallel, per_rank = E / e;
    out.computed_by_rank.assign(out.ranks, 0);
    out.sent_off_rank.assign(out.ranks, 0);
    out.uniform_off_rank.assign(out.ranks, 0);
    for (int r = 0; r < out.ranks; ++r) {
      const int group_first = r - r % e;
      for (int x = 0; x < E; ++x) {
        const int holder = group_first + x / per_rank;
        if (holder < out.ranks) out.computed_by_rank[holder] += out.sent[r][x];
        if (holder != r) out.sent_off_rank[r] += out.sent[r][x];
      }
      out.uniform_off_rank[r] = double(tokens_of[r]) * (e - 1) / e;
    }
    out.rank_imbalance = busiest_over_mean(out.computed_by_rank);
  }
  out.all_to_all_bytes.assign(out.ranks, 0);
  // Steps count from the run's first (a resumed run's is not 0).
  const auto& steps = trace.run.result->steps;
  const int first_step = steps.empty() ? 0 : steps.front().step;
  for (const auto& rank : trace.ranks) {
    if (rank.rank < 0 || rank.rank >= out.ranks) continue;
    for (const auto& event : rank.events) {
      if (event.category != profiling::Category::kCollective) continue;
      if (step >= 0 && event.step != first_step + step) continue;
      if (trace.str(event.name) == "all_to_all")
        out.all_to_all_bytes[rank.rank] += std::clamp<int64_t>(event.bytes, 0, kMostTokens);
    }
  }
  return out;
}

}  // namespace shardscope::analysis
