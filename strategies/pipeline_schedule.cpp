#include "strategies/pipeline_schedule.h"

#include <algorithm>
#include <stdexcept>

namespace shardscope::pipeline {

std::vector<Action> schedule(const std::string& kind, int stage, int stages, int micro_batches) {
  if (stages < 1 || stage < 0 || stage >= stages || micro_batches < 1) {
    throw std::invalid_argument("pipeline schedule: stage " + std::to_string(stage) + " of " +
                                std::to_string(stages) + " with " + std::to_string(micro_batches) +
                                " micro-batches");
  }
  std::vector<Action> out;
  if (kind == "gpipe") {
    for (int i = 0; i < micro_batches; ++i) out.push_back({Pass::kForward, i});
    for (int i = 0; i < micro_batches; ++i) out.push_back({Pass::kBackward, i});
    return out;
  }
  if (kind != "1f1b") throw std::invalid_argument("unknown pipeline schedule '" + kind + "'");
  const int warmup = std::min(stages - stage - 1, micro_batches);
  int forward = 0, backward = 0;
  for (; forward < warmup; ++forward) out.push_back({Pass::kForward, forward});
  while (forward < micro_batches) {
    out.push_back({Pass::kForward, forward++});
    out.push_back({Pass::kBackward, backward++});
  }
  while (backward < micro_batches) out.push_back({Pass::kBackward, backward++});
  return out;
}

int peak_in_flight(const std::vector<Action>& actions) {
  int live = 0, peak = 0;
  for (const auto& a : actions) {
    live += a.pass == Pass::kForward ? 1 : -1;
    peak = std::max(peak, live);
  }
  return peak;
}

double simulated_bubble(const std::string& kind, int stages, int m, double forward_time,
                        double backward_time) {
  std::vector<std::vector<Action>> plans;
  for (int s = 0; s < stages; ++s) plans.push_back(schedule(kind, s, stages, m));
  // Finish times; -1 = not yet done.
  std::vector<std::vector<double>> forward_done(stages, std::vector<double>(m, -1));
  std::vector<std::vector<double>> backward_done(stages, std::vector<double>(m, -1));
  std::vector<size_t> next(stages, 0);
  std::vector<double> clock(stages, 0);
  // Repeatedly run any stage whose next action has its input; a valid schedule always has one.
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int s = 0; s < stages; ++s) {
      while (next[s] < plans[s].size()) {
        const Action& a = plans[s][next[s]];
        double ready = 0;
        if (a.pass == Pass::kForward) {
          if (s > 0 && (ready = forward_done[s - 1][a.micro]) < 0) break;
        } else if (s < stages - 1 && (ready = backward_done[s + 1][a.micro]) < 0) {
          break;
        }
        const double start = std::max(clock[s], ready);
        clock[s] = start + (a.pass == Pass::kForward ? forward_time : backward_time);
        (a.pass == Pass::kForward ? forward_done : backward_done)[s][a.micro] = clock[s];
        ++next[s];
        progressed = true;
      }
    }
  }
  for (int s = 0; s < stages; ++s) {
    if (next[s] != plans[s].size()) throw std::logic_error("pipeline schedule deadlocks");
  }
  // Every stage is busy m (f + b); the pipeline lasts until the last backward of stage 0.
  const double span = *std::max_element(clock.begin(), clock.end());
  return 1.0 - m * (forward_time + backward_time) / span;
}

double bubble_formula(int stages, int micro_batches) {
  return static_cast<double>(stages - 1) / (micro_batches + stages - 1);
}

}  // namespace shardscope::pipeline
