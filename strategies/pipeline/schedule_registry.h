#pragma once

#include <functional>
#include <string>
#include <vector>

#include "strategies/pipeline/pipeline_schedule.h"

namespace shardscope::pipeline {

// Where a schedule puts its stages. Looped: stage r + k p on rank r (one stage per rank is the
// loop with v = 1). V: the pipeline folds back, stages r and 2p-1-r on rank r, so the first and
// the last stage share rank 0.
enum class StagePlacement { kLooped, kV };

// What a pipeline schedule (`--schedule`) says of itself, so that the free functions of
// pipeline_schedule.h ask it instead of comparing its name. Each is defined beside its order, in
// pipeline_orders.cpp.
struct ScheduleInfo {
  std::string name;
  // Stages per rank when `--stages-per-rank` is not given, and the counts it can run
  // (max_stages_per_rank 0: no upper bound).
  int default_stages_per_rank = 1;
  int min_stages_per_rank = 1;
  int max_stages_per_rank = 1;
  StagePlacement placement = StagePlacement::kLooped;
  // Whether backward runs as an input-gradient and a weight-gradient pass (Pass::kInput and
  // Pass::kWeight) rather than whole (Pass::kBackward).
  bool splits_backward = false;
  // What rank `rank` of `ranks` does, in order; called only with arguments the other fields
  // accept.
  std::function<std::vector<Action>(int rank, int ranks, int micro_batches, int stages_per_rank)>
      orders;
  // Why it cannot run `micro_batches` over `ranks` ranks, "" where it can (optional: none means
  // any count).
  std::function<std::string(int ranks, int micro_batches)> micro_batches_problem;
  // The bubble its paper gives, as a fraction of the step with equal forward, input and weight
  // passes, and that formula as text.
  std::function<double(int ranks, int micro_batches, int stages_per_rank)> bubble_formula;
  std::string bubble_formula_text;
  // Whether simulated_bubble of this order with equal passes is exactly bubble_formula. The
  // V-shaped papers' zero needs a steady state that the warm-up PyTorch's orders use (and ours
  // copy) does not fully reach, so for them the formula is only the ideal, a lower bound.
  bool bubble_formula_exact = true;
};

class ScheduleRegistry {
 public:
  // A function-local static, so that registrars in any translation unit find it constructed.
  static ScheduleRegistry& instance();

  // Throws std::logic_error for a schedule registered twice or describing itself inconsistently
  // (no orders or formula, a default stages per rank outside its own bounds).
  void add(ScheduleInfo info);
  const ScheduleInfo* find(const std::string& name) const;
  // Every schedule, in the order they registered. pipeline_orders.cpp registers them all, and a
  // translation unit initialises its statics top to bottom, so the order is the file's: the
  // default (1f1b) first, then gpipe, then each that builds on those before it.
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::vector<ScheduleInfo> entries_;
  std::vector<std::string> names_;
};

// Registers a schedule from a static initialiser beside its order.
struct ScheduleRegistrar {
  explicit ScheduleRegistrar(ScheduleInfo info) {
    ScheduleRegistry::instance().add(std::move(info));
  }
};

}  // namespace shardscope::pipeline
