// Every pipeline schedule: its per-rank order and, beside it, what it says of itself (its
// ScheduleInfo), registered by a static initialiser. They share one file because the multi-stage
// orders share OrderBuilder (and interleaved 1F1B and zero-bubble one order), and because statics
// of one translation unit initialise top to bottom: the order they are defined here is the order
// schedule_kinds() lists them (`--schedule`'s help, the GUI's list, `bench --schedules all`).
// Each multi-stage order is derived from its paper and from how torch.distributed.pipelining lays
// it out, so that a run here executes the same order PyTorch's would; pipeline_orders_test.cpp
// checks them action by action.
#include <algorithm>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "strategies/pipeline/schedule_registry.h"

namespace shardscope::pipeline {
namespace {

// Appends passes of a rank's stages, each stage numbering its forwards and its backwards in
// micro-batch order; a split backward queues its weight pass for whenever the schedule has room.
class OrderBuilder {
 public:
  explicit OrderBuilder(std::vector<int> stages)
      : stages_(std::move(stages)), forwards_(stages_.size()), backwards_(stages_.size()) {}

  void forward(size_t chunk) {
    out_.push_back({Pass::kForward, forwards_[chunk]++, stages_[chunk]});
  }
  void backward(size_t chunk) {
    out_.push_back({Pass::kBackward, backwards_[chunk]++, stages_[chunk]});
  }
  void input(size_t chunk) {
    out_.push_back({Pass::kInput, backwards_[chunk], stages_[chunk]});
    weights_.push_back({Pass::kWeight, backwards_[chunk]++, stages_[chunk]});
  }
  // The oldest weight pass not yet run, if any.
  void weight() {
    if (weights_.empty()) return;
    out_.push_back(weights_.front());
    weights_.pop_front();
  }
  // The oldest weight pass of one stage not yet run, if any.
  void weight_of(size_t chunk) {
    const auto it = std::find_if(weights_.begin(), weights_.end(),
                                 [&](const Action& a) { return a.stage == stages_[chunk]; });
    if (it == weights_.end()) return;
    out_.push_back(*it);
    weights_.erase(it);
  }
  bool weights_pending(size_t chunk) const {
    return std::any_of(weights_.begin(), weights_.end(),
                       [&](const Action& a) { return a.stage == stages_[chunk]; });
  }
  void all_weights() {
    while (!weights_.empty()) weight();
  }
  int forwards(size_t chunk) const { return forwards_[chunk]; }

  // Drops the passes of micro-batches past the last (ZB-V pads its steady state to 2p-1).
  std::vector<Action> take(int micro_batches) {
    out_.erase(std::remove_if(out_.begin(), out_.end(),
                              [&](const Action& a) { return a.micro >= micro_batches; }),
               out_.end());
    return std::move(out_);
  }

 private:
  std::vector<int> stages_;
  std::vector<int> forwards_, backwards_;
  std::deque<Action> weights_;
  std::vector<Action> out_;
};

std::vector<int> looped(int rank, int ranks, int stages_per_rank) {
  std::vector<int> stages;
  for (int k = 0; k < stages_per_rank; ++k) stages.push_back(k * ranks + rank);
  return stages;
}

double one_stage_bubble(int ranks, int micro_batches, int /*stages_per_rank*/) {
  const double idle = ranks - 1;
  return idle / (micro_batches + idle);
}

// PipeDream-Flush (Narayanan et al., 2021): rank r warms up with p-r-1 forwards, then runs one
// forward and one backward alternately, then the remaining backwards, so it holds at most p-r
// micro-batches. The default schedule.
std::vector<Action> one_f_one_b(int rank, int ranks, int micro_batches, int /*stages_per_rank*/) {
  const int m = micro_batches;
  std::vector<Action> out;
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

ScheduleInfo one_f_one_b_info() {
  ScheduleInfo s;
  s.name = "1f1b";
  s.orders = one_f_one_b;
  s.bubble_formula = one_stage_bubble;
  s.bubble_formula_text = "(p-1)/(m+p-1)";
  return s;
}
const ScheduleRegistrar kOneFOneB(one_f_one_b_info());

// GPipe (Huang et al., 2019): every forward, then every backward; each rank holds all m
// micro-batches at once, and idles as long as 1F1B.
std::vector<Action> gpipe(int rank, int /*ranks*/, int micro_batches, int /*stages_per_rank*/) {
  std::vector<Action> out;
  for (int i = 0; i < micro_batches; ++i) out.push_back({Pass::kForward, i, rank});
  for (int i = 0; i < micro_batches; ++i) out.push_back({Pass::kBackward, i, rank});
  return out;
}

ScheduleInfo gpipe_info() {
  ScheduleInfo s;
  s.name = "gpipe";
  s.orders = gpipe;
  s.bubble_formula = one_stage_bubble;
  s.bubble_formula_text = "(p-1)/(m+p-1)";
  return s;
}
const ScheduleRegistrar kGPipe(gpipe_info());

// Interleaved 1F1B (Narayanan et al., 2021) and its zero-bubble form (Qi et al., 2023, ZB1P):
// micro-batches go through the rank's v stages in rounds of m / max(1, m / p) micro-batches.
std::vector<Action> interleaved(int rank, int ranks, int stages_per_rank, int micro_batches,
                                bool zero_bubble) {
  const int v = stages_per_rank;
  const int rounds = std::max(1, micro_batches / ranks);
  const int per_round = micro_batches / rounds;
  const int passes = v * micro_batches;  // forwards, and backwards, this rank runs
  // Warm-up fills the rank's later stages for a round each, plus the hops behind the last rank
  // (two passes a hop for 1F1B; one for zero-bubble, whose weight passes fill the rest).
  const int warmup =
      std::min((v - 1) * per_round + (zero_bubble ? 1 : 2) * (ranks - 1 - rank), passes);
  // Forwards walk the stages front to back a round at a time; backwards back to front.
  auto forward_chunk = [&](int k) { return (k / per_round) % v; };
  auto backward_chunk = [&](int k) { return v - 1 - (k / per_round) % v; };
  OrderBuilder order(looped(rank, ranks, v));
  for (int k = 0; k < warmup; ++k) order.forward(forward_chunk(k));
  for (int k = 0; k < passes; ++k) {
    if (warmup + k < passes) order.forward(forward_chunk(warmup + k));
    if (!zero_bubble) {
      order.backward(backward_chunk(k));
      continue;
    }
    order.input(backward_chunk(k));
    // Rank r defers its first r weight passes: they fill the bubble at the end.
    if (k >= rank) order.weight();
  }
  order.all_weights();
  return order.take(micro_batches);
}

// Interleaving sends micro-batches round the ranks in rounds of equal size (PyTorch's
// Interleaved1F1B and InterleavedZeroBubble refuse the counts that do not divide).
std::function<std::string(int, int)> equal_rounds(const std::string& name) {
  return [name](int ranks, int micro_batches) -> std::string {
    const int rounds = std::max(1, micro_batches / ranks);
    if (micro_batches % rounds == 0) return "";
    return name + " sends micro-batches round the " + std::to_string(ranks) + " ranks in " +
           std::to_string(rounds) + " equal rounds: " + std::to_string(micro_batches) +
           " micro-batches do not divide into them";
  };
}

// v stages per rank (two by default), looped, each a round of micro-batches at a time: the
// bubble shrinks v-fold, whatever the passes cost.
ScheduleInfo interleaved_info() {
  ScheduleInfo s;
  s.name = "interleaved-1f1b";
  s.default_stages_per_rank = 2;
  s.min_stages_per_rank = 2;
  s.max_stages_per_rank = 0;
  s.orders = [](int rank, int ranks, int micro_batches, int stages_per_rank) {
    return interleaved(rank, ranks, stages_per_rank, micro_batches, /*zero_bubble=*/false);
  };
  s.micro_batches_problem = equal_rounds(s.name);
  s.bubble_formula = [](int ranks, int micro_batches, int stages_per_rank) {
    const double idle = ranks - 1;
    return idle / (stages_per_rank * micro_batches + idle);
  };
  s.bubble_formula_text = "(p-1)/(v*m+p-1)";
  return s;
}
const ScheduleRegistrar kInterleaved(interleaved_info());

// Interleaved 1F1B with backward split, the weight passes (which nobody waits for) filling the
// bubble. Qi et al.: ZB-H1 idles (p-1)(F + B - W) where 1F1B idles (p-1)(F + B + W), B the
// input pass, so (p-1)/(3 v m + p-1) with equal passes.
ScheduleInfo zero_bubble_info() {
  ScheduleInfo s;
  s.name = "zero-bubble";
  s.default_stages_per_rank = 2;
  s.min_stages_per_rank = 2;
  s.max_stages_per_rank = 0;
  s.splits_backward = true;
  s.orders = [](int rank, int ranks, int micro_batches, int stages_per_rank) {
    return interleaved(rank, ranks, stages_per_rank, micro_batches, /*zero_bubble=*/true);
  };
  s.micro_batches_problem = equal_rounds(s.name);
  s.bubble_formula = [](int ranks, int micro_batches, int stages_per_rank) {
    const double idle = ranks - 1;
    return idle / (3 * stages_per_rank * micro_batches + idle);
  };
  s.bubble_formula_text = "(p-1)/(3*v*m+p-1)";
  return s;
}
const ScheduleRegistrar kZeroBubble(zero_bubble_info());

// The V-shaped papers' bubble: ZB-V idles (p-1)(F + B - 2W) per stage pair, DualPipe(V)
// (p-1)(F&B + B - 3W): none when the passes cost the same.
double no_bubble(int /*ranks*/, int /*micro_batches*/, int /*stages_per_rank*/) {
  return 0.0;
}

// ZB-V (Qi et al., 2023, section 6): two stages per rank in a V, backward split.
std::vector<Action> zbv(int rank, int ranks, int micro_batches) {
  const int p = ranks, r = rank;
  // The steady state assumes at least 2p-1 micro-batches; fewer leave their passes out.
  const int n = std::max(2 * p - 1, micro_batches);
  OrderBuilder order({r, 2 * p - 1 - r});
  auto input_then_weight = [&](int chunk) {
    order.input(chunk);
    order.weight();
  };
  for (int i = 0; i < 2 * (p - r) - 1; ++i) order.forward(0);
  for (int i = 0; i < r; ++i) {
    order.forward(1);
    order.forward(0);
  }
  for (int i = 0; i < p - r; ++i) {
    order.forward(1);
    input_then_weight(1);
  }
  while (order.forwards(1) < order.forwards(0) || order.forwards(0) < n) {
    if (order.forwards(0) < n) order.forward(0);
    input_then_weight(0);
    order.forward(1);
    input_then_weight(1);
  }
  // Cool-down: input gradients first (the next rank waits for them), weight passes after, the
  // second stage's before the first's.
  for (int i = 0; i < r; ++i) {
    order.input(0);
    order.input(1);
  }
  for (int i = 0; i < p - r; ++i) {
    order.input(0);
    order.weight_of(0);
  }
  while (order.weights_pending(1)) order.weight_of(1);
  while (order.weights_pending(0)) order.weight_of(0);
  return order.take(micro_batches);
}

ScheduleInfo zbv_info() {
  ScheduleInfo s;
  s.name = "zbv";
  s.default_stages_per_rank = 2;
  s.min_stages_per_rank = 2;
  s.max_stages_per_rank = 2;
  s.placement = StagePlacement::kV;
  s.splits_backward = true;
  s.orders = [](int rank, int ranks, int micro_batches, int /*stages_per_rank*/) {
    return zbv(rank, ranks, micro_batches);
  };
  s.bubble_formula = no_bubble;
  s.bubble_formula_text = "0";
  s.bubble_formula_exact = false;
  return s;
}
const ScheduleRegistrar kZbv(zbv_info());

// DualPipeV (DeepSeek-V3's DualPipe folded into a V): two stages per rank, forward and backward
// of different stages paired so that one's compute hides the other's communication (overlapped
// F+B pairs run here as their forward, then their backward).
std::vector<Action> dualpipev(int rank, int ranks, int micro_batches) {
  const int p = ranks, r = rank;
  OrderBuilder order({r, 2 * p - 1 - r});
  for (int i = 0; i < 2 * (p - r - 1); ++i) order.forward(0);
  for (int i = 0; i <= r; ++i) {
    order.forward(0);
    order.forward(1);
  }
  for (int i = 0; i < p - r - 1; ++i) {
    order.input(1);
    order.weight();
    order.forward(1);
  }
  // Steady state: each forward paired with a backward of the other stage.
  for (int i = 0; i < micro_batches - 2 * p + r + 1; ++i) {
    order.forward(0);
    order.backward(1);
    order.forward(1);
    order.backward(0);
  }
  for (int i = 0; i < p - r - 1; ++i) {
    order.backward(1);
    order.forward(1);
    order.backward(0);
  }
  // Drain: the second half of the backwards split, their weight passes filling the gaps.
  bool split = false;
  auto backward = [&](int chunk) { split ? order.input(chunk) : order.backward(chunk); };
  for (int i = 0; i <= r; ++i) {
    if (i == (r + 1) / 2 && r % 2 == 1) split = true;
    backward(1);
    if (i == (r + 1) / 2 && r % 2 == 0) split = true;
    backward(0);
  }
  for (int i = 0; i < p - r - 1; ++i) {
    order.weight();
    backward(0);
  }
  for (int i = 0; i <= r; ++i) order.weight();
  return order.take(micro_batches);
}

ScheduleInfo dualpipev_info() {
  ScheduleInfo s;
  s.name = "dualpipev";
  s.default_stages_per_rank = 2;
  s.min_stages_per_rank = 2;
  s.max_stages_per_rank = 2;
  s.placement = StagePlacement::kV;
  s.splits_backward = true;  // in the drain
  s.orders = [](int rank, int ranks, int micro_batches, int /*stages_per_rank*/) {
    return dualpipev(rank, ranks, micro_batches);
  };
  // PyTorch's DualPipeV refuses fewer micro-batches than stages, and this order is its.
  s.micro_batches_problem = [](int ranks, int micro_batches) -> std::string {
    if (micro_batches >= 2 * ranks) return "";
    return "dualpipev needs at least as many micro-batches as stages (" +
           std::to_string(2 * ranks) + "), not " + std::to_string(micro_batches);
  };
  s.bubble_formula = no_bubble;
  s.bubble_formula_text = "0";
  s.bubble_formula_exact = false;
  return s;
}
const ScheduleRegistrar kDualPipeV(dualpipev_info());

}  // namespace
}  // namespace shardscope::pipeline
