#include "strategies/pipeline/pipeline_schedule.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>

#include "strategies/pipeline/schedule_registry.h"

namespace shardscope::pipeline {
namespace {

// What the functions below answer for a name no schedule registered (a configuration not yet
// validated, a trace of a schedule since renamed): its stages looped, at least two per rank,
// backward whole, and 1F1B's bubble. schedule() refuses it.
const ScheduleInfo& described(const std::string& kind) {
  if (const ScheduleInfo* info = ScheduleRegistry::instance().find(kind)) return *info;
  static const ScheduleInfo unknown = [] {
    ScheduleInfo s;
    s.default_stages_per_rank = 2;
    s.min_stages_per_rank = 2;
    s.max_stages_per_rank = 0;
    s.bubble_formula = [](int p, int m, int /*v*/) {
      const double idle = p - 1;
      return idle / (m + idle);
    };
    s.bubble_formula_text = "(p-1)/(m+p-1)";
    return s;
  }();
  return unknown;
}

// "one stage", "two stages": as the messages have always said it.
std::string count_of_stages(int n) {
  const char* const words[] = {"no", "one", "two", "three", "four"};
  const std::string count = n >= 0 && n < 5 ? words[n] : std::to_string(n);
  return count + (n == 1 ? " stage" : " stages");
}

}  // namespace

const std::vector<std::string>& schedule_kinds() {
  return ScheduleRegistry::instance().names();
}

int default_stages_per_rank(const std::string& kind) {
  return described(kind).default_stages_per_rank;
}

bool splits_backward(const std::string& kind) {
  return described(kind).splits_backward;
}

std::string kind_problem(const std::string& kind) {
  if (ScheduleRegistry::instance().find(kind) != nullptr) return "";
  std::string names;
  for (const auto& k : schedule_kinds()) names += (names.empty() ? "" : ", ") + k;
  return "unknown pipeline schedule '" + kind + "' (" + names + ")";
}

std::string stages_per_rank_problem(const std::string& kind, int v) {
  const ScheduleInfo& info = described(kind);
  const int least = info.min_stages_per_rank, most = info.max_stages_per_rank;
  if (v >= least && (most == 0 || v <= most)) return "";
  std::string allowed;
  if (least == most) {
    allowed = (least > 1 ? "exactly " : "") + count_of_stages(least);
  } else if (most == 0) {
    allowed = "at least " + count_of_stages(least);
  } else {
    allowed = "from " + std::to_string(least) + " to " + count_of_stages(most);
  }
  return kind + " runs " + allowed + " per rank, not " + std::to_string(v);
}

std::string micro_batches_problem(const std::string& kind, int p, int m) {
  const ScheduleInfo& info = described(kind);
  return info.micro_batches_problem ? info.micro_batches_problem(p, m) : "";
}

std::vector<int> rank_stages(const std::string& kind, int rank, int ranks, int v) {
  if (described(kind).placement == StagePlacement::kV) return {rank, 2 * ranks - 1 - rank};
  std::vector<int> stages;
  for (int k = 0; k < v; ++k) stages.push_back(k * ranks + rank);
  return stages;
}

int stage_rank(const std::string& kind, int stage, int ranks, int /*stages_per_rank*/) {
  if (described(kind).placement == StagePlacement::kV && stage >= ranks) {
    return 2 * ranks - 1 - stage;
  }
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
  return described(kind).orders(rank, ranks, m, v);
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

std::vector<std::vector<TimedAction>> simulate_schedule(
    const std::string& kind, int ranks, int m, int v,
    const std::function<double(Pass, int)>& seconds, double transfer_s,
    const std::function<double(int)>& first_forward_s) {
  std::vector<std::vector<Action>> plans;
  for (int r = 0; r < ranks; ++r) plans.push_back(schedule(kind, r, ranks, m, v));
  const int stages = ranks * v;
  // When each (pass, stage, micro-batch) finished; a full backward counts as its input pass too.
  std::map<std::tuple<Pass, int, int>, double> done;
  auto finished = [&](Pass pass, int stage, int micro) {
    const auto it = done.find({pass, stage, micro});
    return it == done.end() ? -1.0 : it->second;
  };
  // A pass waiting for a stage on another rank also waits for the transfer.
  auto arrives = [&](double at, int stage, int from_stage) {
    if (at < 0) return at;
    const bool same_rank =
        stage_rank(kind, stage, ranks, v) == stage_rank(kind, from_stage, ranks, v);
    return same_rank ? at : at + transfer_s;
  };
  std::vector<std::vector<TimedAction>> timed(ranks);
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
          if (a.stage > 0 && (ready = arrives(finished(Pass::kForward, a.stage - 1, a.micro),
                                              a.stage, a.stage - 1)) < 0)
            break;
        } else if (a.pass == Pass::kWeight) {
          if ((ready = finished(Pass::kInput, a.stage, a.micro)) < 0) break;
        } else if (a.stage < stages - 1 &&
                   (ready = arrives(finished(Pass::kInput, a.stage + 1, a.micro), a.stage,
                                    a.stage + 1)) < 0) {
          break;
        } else if (a.stage == stages - 1 &&
                   (ready = finished(Pass::kForward, a.stage, a.micro)) < 0) {
          break;
        }
        const double start = std::max(clock[r], ready);
        clock[r] = start + seconds(a.pass, a.stage);
        if (first_forward_s && a.pass == Pass::kForward && a.micro == 0)
          clock[r] += first_forward_s(a.stage);
        done[{a.pass == Pass::kBackward ? Pass::kInput : a.pass, a.stage, a.micro}] = clock[r];
        timed[r].push_back({a, start, clock[r]});
        ++next[r];
        progressed = true;
      }
    }
  }
  for (int r = 0; r < ranks; ++r) {
    if (next[r] != plans[r].size()) throw std::logic_error(kind + " pipeline schedule deadlocks");
  }
  return timed;
}

double simulated_bubble(const std::string& kind, int ranks, int m, int v, PassCosts costs) {
  auto cost = [&](Pass pass, int) {
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
  double span = 0;
  for (const auto& rank : simulate_schedule(kind, ranks, m, v, cost))
    span = std::max(span, rank.empty() ? 0.0 : rank.back().end);
  // Every rank is busy m v (f + i + w); the pipeline lasts until the last rank finishes.
  return 1.0 - m * v * (costs.forward + costs.input + costs.weight) / span;
}

double bubble_formula(const std::string& kind, int p, int m, int v) {
  return described(kind).bubble_formula(p, m, v);
}

std::string bubble_formula_text(const std::string& kind) {
  return described(kind).bubble_formula_text;
}

}  // namespace shardscope::pipeline
