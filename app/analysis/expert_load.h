#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiling/trace/trace.h"

namespace shardscope::analysis {

// What a mixture-of-experts run's routing did in one step, as the Experts tab draws it: how many
// tokens each rank sent each expert (recorded by the run), which rank computes each expert
// (expert parallelism: rank j of each group of ep holds experts [j E/ep, (j+1) E/ep); without it,
// every rank computes its own tokens), the load imbalance, and the all_to_all traffic.
struct ExpertLoad {
  int experts = 0, layers = 0, ranks = 0, steps = 0;
  int top_k = 0;
  int expert_parallel = 0;  // ep degree; 0: the strategy does not spread experts
  // [sender rank][expert] tokens in the step, summed over the chosen layers.
  std::vector<std::vector<int64_t>> sent;
  std::vector<int64_t> per_expert;  // summed over senders
  // Busiest expert over the mean: 1 is perfect balance; a dropless layer's slowest expert (and
  // under ep its rank) sets how long everyone waits in the combine.
  double expert_imbalance = 0;
  // Under ep: tokens each rank's experts computed (received), and the busiest over the mean.
  std::vector<int64_t> computed_by_rank;
  double rank_imbalance = 0;
  // Under ep, per rank: tokens it sent to experts on other ranks, and what uniform routing would
  // send (N k (ep - 1) / ep, N its tokens in the step).
  std::vector<int64_t> sent_off_rank;
  std::vector<double> uniform_off_rank;
  // Per rank: all_to_all bytes it sent in the step (the trace's calls, forward and backward).
  std::vector<int64_t> all_to_all_bytes;
  std::string problem;  // why there is nothing to show (empty when there is)
};

// `step` counts from the first recorded step (-1: every step summed); `layer` -1: every layer.
ExpertLoad expert_load(const profiling::Trace& trace, int step, int layer);

}  // namespace shardscope::analysis
