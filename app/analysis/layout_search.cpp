#include "app/analysis/layout_search.h"

#include "engine/model/core_attention.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>

#include "engine/train/strategy_registry.h"

namespace shardscope::analysis {
namespace {

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

}  // namespace

std::string SearchedLayout::label() const {
  std::ostringstream o;
  o << "tp " << tp << " pp " << pp << " dp " << dp;
  if (pp > 1)
    o << " " << schedule << (stages_per_rank > 1 ? " v" + std::to_string(stages_per_rank) : "");
  o << ", mb " << micro_batch_sequences << " x " << micro_batches
    << (recompute ? ", recompute" : "") << (selective ? ", selective recompute" : "")
    << (dp > 1 ? ", " + data_parallel_sync : "");
  return o.str();
}

std::vector<SearchedLayout> search_layouts(const Config& config,
                                           const profiling::HardwareProfile& hw, int nodes,
                                           std::string* refused) {
  const int gpus = config.world;
  const int64_t batch = config.global_batch > 0
                            ? config.global_batch
                            : int64_t(config.micro_batch) * config.world * config.grad_accum;
  // One data-parallel sync per ZeRO stage the strategies offer for a model-parallel layout.
  std::vector<std::string> syncs;
  std::set<int> stages;
  for (const std::string& name : StrategyRegistry::instance().names()) {
    const StrategyTraits& traits = StrategyRegistry::instance().find(name)->traits;
    if (traits.data_parallel_sync && stages.insert(traits.zero_stage).second) syncs.push_back(name);
  }
  if (syncs.empty()) return {};
  // Without tensor or pipeline groups: one data-parallel strategy per ZeRO stage (DDP, ZeRO-1,
  // ZeRO-2's gradients and ZeRO-3's parameters sharded too).
  std::vector<std::string> data_parallel;
  std::set<int> data_parallel_stages;
  for (const std::string& name : StrategyRegistry::instance().names()) {
    const StrategyTraits& traits = strategy_traits(name);
    if (traits.family == StrategyFamily::kDataParallel &&
        data_parallel_stages.insert(traits.zero_stage).second)
      data_parallel.push_back(name);
  }
  std::vector<SearchedLayout> found;
  const std::vector<std::string> no_strategies;
  const auto project = [&](const Config& c, SearchedLayout s) {
    try {
      const ConfigurationProjection p = project_configuration(c, hw, nodes, /*draw=*/false);
      s.step_s = p.step_s, s.mfu = p.mfu, s.peak_bytes = p.memory.total();
      s.fits = p.fits;
      found.push_back(s);
    } catch (const ConfigError& e) {
      // A layout this model or machine cannot take: not a candidate.
      if (refused != nullptr && refused->empty()) *refused = e.what();
    }
  };
  for (int tp : divisors(std::min(gpus, hw.gpus_per_node))) {
    if (gpus % tp != 0 || config.model.heads % tp != 0 || config.model.vocab % tp != 0) continue;
    for (int pp : divisors(gpus / tp)) {
      if (pp > config.model.layers) continue;
      const int dp = gpus / (tp * pp);
      for (int sequences : {1, 2, 4}) {
        if (batch % (int64_t(dp) * sequences) != 0) continue;
        const int64_t m = batch / (int64_t(dp) * sequences);
        if (m < pp || m > 4096) continue;
        for (int v : pp > 1 ? std::vector<int>{1, 2, 3} : std::vector<int>{1}) {
          if (config.model.layers % (pp * v) != 0) continue;
          if (v > 1 && m % pp != 0) continue;  // interleaving runs micro-batches in rounds of p
          // None, full, and selective where there is an attention worth recomputing.
          const int recomputes = attention_settings(config.model).unfused ? 3 : 2;
          for (int r = 0; r < recomputes; ++r) {
            const bool recompute = r == 1, selective = r == 2;
            const bool layout = tp > 1 || pp > 1;
            for (size_t k = 0; layout && k < (dp > 1 ? syncs.size() : 1); ++k) {
              const std::string& sync = syncs[k];
              Config c = config;
              c.strategy = "hybrid";
              c.global_batch = int(batch);
              StrategyOptions& o = c.strategy_options;
              o.tensor_parallel = tp, o.pipeline_parallel = pp, o.data_parallel = dp;
              o.micro_batches = int(m);
              o.schedule = v > 1 ? "interleaved-1f1b" : "1f1b";
              o.stages_per_rank = v;
              o.sequence_parallel = tp > 1;
              o.activation_checkpointing = recompute;
              c.model.selective_recompute = selective;
              o.data_parallel_sync = sync;
              project(c,
                      {tp, pp, dp, v, int(m), sequences, o.schedule, recompute, selective, sync});
            }
            // The replica's micro-batches as accumulation passes, one after the other.
            for (const std::string& strategy : layout ? no_strategies : data_parallel) {
              Config c = config;
              c.strategy = strategy;
              // None of a layout's options, which a data-parallel strategy refuses.
              const StrategyOptions none;
              StrategyOptions& o = c.strategy_options;
              o.tensor_parallel = none.tensor_parallel,
              o.pipeline_parallel = none.pipeline_parallel;
              o.data_parallel = none.data_parallel, o.micro_batches = none.micro_batches;
              o.schedule = none.schedule, o.stages_per_rank = none.stages_per_rank;
              o.sequence_parallel = none.sequence_parallel;
              o.data_parallel_sync = none.data_parallel_sync;
              o.context_parallel = none.context_parallel, o.expert_parallel = none.expert_parallel;
              c.global_batch = int(batch);
              c.grad_accum = int(m);
              c.strategy_options.activation_checkpointing = recompute;
              c.model.selective_recompute = selective;
              project(c, {tp, pp, dp, v, int(m), sequences, "", recompute, selective, strategy});
            }
          }
        }
      }
    }
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const SearchedLayout& a, const SearchedLayout& b) {
                     if (a.fits != b.fits) return a.fits;
                     return a.step_s < b.step_s;
                   });
  return found;
}

std::string search_text(const std::vector<SearchedLayout>& layouts, size_t shown) {
  std::ostringstream o;
  size_t fitting = 0;
  for (const auto& l : layouts) fitting += l.fits;
  o << layouts.size() << " layouts projected, " << fitting << " fit in memory; the fastest:\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-66s %10s %7s %10s\n", "layout", "step s", "MFU", "GiB/GPU");
  o << line;
  for (size_t i = 0; i < layouts.size() && i < shown; ++i) {
    const SearchedLayout& l = layouts[i];
    std::snprintf(line, sizeof line, "%-66s %10.3f %6.1f%% %10.1f%s\n", l.label().c_str(), l.step_s,
                  100 * l.mfu, l.peak_bytes / (1024.0 * 1024 * 1024),
                  l.fits ? "" : "  does not fit");
    o << line;
  }
  return o.str();
}

}  // namespace shardscope::analysis
