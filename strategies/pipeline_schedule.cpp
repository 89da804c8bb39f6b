#include "strategies/pipeline_schedule.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>

#include "strategies/pipeline_orders.h"

namespace shardscope::pipeline {
namespace {

bool v_shaped(const std::string& kind) {
  return kind == "zbv" || kind == "dualpipev";
}
bool single_stage(const std::string& kind) {
  return kind == "gpipe" || kind == "1f1b";
}

}  // namespace

const std::vector<std::string>& schedule_kinds() {
  static const std::vector<std::string> kinds{"1f1b",        "gpipe", "interleaved-1f1b",
                                              "zero-bubble", "zbv",   "dualpipev"};
  return kinds;
}

int default_stages_per_rank(const std::string& kind) {
  return single_stage(kind) ? 1 : 2;
}

bool splits_backward(const std::string& kind) {
  return kind == "zero-bubble" || v_shaped(kind);
}

std::string kind_problem(const std::string& kind) {
  const auto& kinds = schedule_kinds();
  if (std::find(kinds.begin(), kinds.end(), kind) != kinds.end()) return "";
  std::string names;
  for (const auto& k : kinds) names += (names.empty() ? "" : ", ") + k;
  return "unknown pipeline schedule '" + kind + "' (" + names + ")";
}

std::string stages_per_rank_problem(const std::string& kind, int v) {
  const std::string vs = std::to_string(v);
  if (single_stage(kind) && v != 1) return kind + " runs one stage per rank, not " + vs;
  if (v_shaped(kind) && v != 2) return kind + " runs exactly two stages per rank, not " + vs;
  if (!single_stage(kind) && v < 2) return kind + " runs at least two stages per rank, not " + vs;
  return "";
}

std::string micro_batches_problem(const std::string& kind, int p, int m) {
  if (kind == "interleaved-1f1b" || kind == "zero-bubble") {
    // Micro-batches go round the ranks in rounds of equal size.
    const int rounds = std::max(1, m / p);
    if (m % rounds != 0) {
      return kind + " sends micro-batches round the " + std::to_string(p) + " ranks in " +
             std::to_string(rounds) + " equal rounds: " + std::to_string(m) +
             " micro-batches do not divide into them";
    }
  }
  if (kind == "dualpipev" && m < 2 * p) {
    return "dualpipev needs at least as many micro-batches as stages (" + std::to_string(2 * p) +
           "), not " + std::to_string(m);
  }
  return "";
}

std::vector<int> rank_stages(const std::string& kind, int rank, int ranks, int v) {
  if (v_shaped(kind)) return {rank, 2 * ranks - 1 - rank};
  std::vector<int> stages;
  for (int k = 0; k < v; ++k) stages.push_back(k * ranks + rank);
  return stages;
}

int stage_rank(const std::string& kind, int stage, int ranks, int /*stages_per_rank*/) {
  if (v_shaped(kind) && stage >= ranks) return 2 * ranks - 1 - stage;
  return stage % ranks;
}

std::vector<Action> schedule(const std::string& kind, int rank, int ranks, int m, int v) {
  if (ranks < 1 || rank < 0 || rank >= ranks || m < 1) {
    throw std::invalid_argument("pipeline schedule: rank " + std::to_string(rank) + " of " +
                                std::to_string(ranks) + " with " + std::to_string(m) +
                                " micro-batches");
  }
  for (const std::string& problem : {kind_problem(kind), stages_per_rank_problem(kind, v),
                                     micro_batches_problem(kind, ranks, m)}) {
    if (!problem.empty()) throw std::invalid_argument(problem);
  }
  if (kind == "interleaved-1f1b" || kind == "zero-bubble") {
    return orders::interleaved(rank, ranks, v, m, kind == "zero-bubble");
  }
  if (kind == "zbv") return orders::zbv(rank, ranks, m);
  if (kind == "dualpipev") return orders::dualpipev(rank, ranks, m);
  std::vector<Action> out;
  if (kind == "gpipe") {
    for (int i = 0; i < m; ++i) out.push_back({Pass::kForward, i, rank});
    for (int i = 0; i < m; ++i) out.push_back({Pass::kBackward, i, rank});
    return out;
  }
  const int warmup = std::min(ranks - rank - 1, m);
  int forward = 0, backward = 0;
  for (; forward < warmup; ++forward) out.push_back({Pass::kForward, forward, rank});
  while (forward < m) {
    out.push_back({Pass::kForward, forward++, rank});
    out.push_back({Pass::kBackward, backward++, rank});
  }
  while (backward < m) out.push_back({Pass::kBackward, backward++, rank});
  return out;
}

int peak_in_flight(const std::vector<Action>& actions) {
  int live = 0, peak = 0;
  for (const auto& a : actions) {
    if (a.pass == Pass::kInput) continue;  // the weight pass still needs the activations
    live += a.pass == Pass::kForward ? 1 : -1;
    peak = std::max(peak, live);
  }
  return peak;
}

double simulated_bubble(const std::string& kind, int ranks, int m, int v, PassCosts costs) {
  std::vector<std::vector<Action>> plans;
  for (int r = 0; r < ranks; ++r) plans.push_back(schedule(kind, r, ranks, m, v));
  const int stages = ranks * v;
  // When each (pass, stage, micro-batch) finished; a full backward counts as its input pass too.
  std::map<std::tuple<Pass, int, int>, double> done;
  auto finished = [&](Pass pass, int stage, int micro) {
    const auto it = done.find({pass, stage, micro});
    return it == done.end() ? -1.0 : it->second;
  };
  auto cost = [&](Pass pass) {
    switch (pass) {
      case Pass::kForward:
        return costs.forward;
      case Pass::kInput:
        return costs.input;
      case Pass::kWeight:
        return costs.weight;
      case Pass::kBackward:
        break;
    }
    return costs.input + costs.weight;
  };
  std::vector<size_t> next(ranks, 0);
  std::vector<double> clock(ranks, 0);
  // Repeatedly run any rank whose next action has its input; a valid schedule always has one.
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int r = 0; r < ranks; ++r) {
      while (next[r] < plans[r].size()) {
        const Action& a = plans[r][next[r]];
        double ready = 0;
        if (a.pass == Pass::kForward) {
          if (a.stage > 0 && (ready = finished(Pass::kForward, a.stage - 1, a.micro)) < 0) break;
        } else if (a.pass == Pass::kWeight) {
          if ((ready = finished(Pass::kInput, a.stage, a.micro)) < 0) break;
        } else if (a.stage < stages - 1 &&
                   (ready = finished(Pass::kInput, a.stage + 1, a.micro)) < 0) {
          break;
        } else if (a.stage == stages - 1 &&
                   (ready = finished(Pass::kForward, a.stage, a.micro)) < 0) {
          break;
        }
        const double start = std::max(clock[r], ready);
        clock[r] = start + cost(a.pass);
        done[{a.pass == Pass::kBackward ? Pass::kInput : a.pass, a.stage, a.micro}] = clock[r];
        ++next[r];
        progressed = true;
      }
    }
  }
  for (int r = 0; r < ranks; ++r) {
    if (next[r] != plans[r].size()) throw std::logic_error(kind + " pipeline schedule deadlocks");
  }
  // Every rank is busy m v (f + i + w); the pipeline lasts until the last rank finishes.
  const double span = *std::max_element(clock.begin(), clock.end());
  return 1.0 - m * v * (costs.forward + costs.input + costs.weight) / span;
}

double bubble_formula(const std::string& kind, int p, int m, int v) {
  const double idle = p - 1;
  if (kind == "interleaved-1f1b") return idle / (v * m + idle);
  // Qi et al.: ZB-H1 idles (p-1)(F + B - W) where 1F1B idles (p-1)(F + B + W), B the input pass.
  if (kind == "zero-bubble") return idle / (3 * v * m + idle);
  // ZB-V idles (p-1)(F + B - 2W) per stage pair; DualPipe(V) (p-1)(F&B + B - 3W): none when
  // the passes cost the same.
  if (v_shaped(kind)) return 0.0;
  return idle / (m + idle);
}

std::string bubble_formula_text(const std::string& kind) {
  if (kind == "interleaved-1f1b") return "(p-1)/(v*m+p-1)";
  if (kind == "zero-bubble") return "(p-1)/(3*v*m+p-1)";
  if (v_shaped(kind)) return "0";
  return "(p-1)/(m+p-1)";
}

}  // namespace shardscope::pipeline
