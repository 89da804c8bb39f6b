#include "strategies/pipeline_orders.h"

#include <algorithm>
#include <deque>

namespace shardscope::pipeline::orders {
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

}  // namespace

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

}  // namespace shardscope::pipeline::orders
