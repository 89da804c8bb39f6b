#pragma once

#include <functional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "strategies/pipeline/pipeline_schedule.h"

namespace shardscope {

class Comm;
class TensorParallelStage;
struct StrategyOptions;

// One rank's part of a pipeline schedule for one training micro-step: it runs the forwards and
// backwards (whole, or split into input and weight passes) of the stages it holds, in the
// schedule's order, receiving activations and gradients before a pass and sending them after.
// Between two stages on this rank they are handed over directly. Messages are tagged by the
// stage they enter, so the two directions and the v stages never mix; within a stage they pair
// up in micro-batch order.
class PipelineRuntime {
 public:
  struct Setup {
    std::string kind;
    int rank = 0;
    int ranks = 1;
    int stages_per_rank = 1;
    int micro_batches = 1;
    Comm* comm = nullptr;                      // the pipeline group; null with one rank
    std::vector<TensorParallelStage*> chunks;  // this rank's stages, in rank_stages order
    const StrategyOptions* options = nullptr;  // the forwards' compute precision
  };
  // What the strategy does around the passes that finish a chunk's gradients for the step.
  struct Hooks {
    // Before the last pass that produces chunk `chunk`'s weight gradients (`output` is the
    // chunk's output for that micro-batch, which a whole backward starts from).
    std::function<void(size_t chunk, const torch::Tensor& output)> before_last_gradients;
    // After a weight pass accumulated chunk `chunk`'s gradients outside autograd's hooks.
    std::function<void(size_t chunk, bool last)> after_weight_pass;
    std::function<void()> after_backward;  // after each whole backward
  };

  explicit PipelineRuntime(Setup setup);

  // Runs the step on the replica's `inputs` / `targets` (already split into micro-batches), the
  // last stage's loss scaled by `loss_scale` / m. Returns the summed loss on the rank holding the
  // last stage, 0 elsewhere.
  double run(const std::vector<torch::Tensor>& inputs, const std::vector<torch::Tensor>& targets,
             double loss_scale, bool last_micro, const Hooks& hooks);

  bool holds_last_stage() const;

 private:
  struct Impl;
  Setup setup_;
  std::vector<int> stages_;  // global stage of each chunk
  std::vector<pipeline::Action> actions_;
};

}  // namespace shardscope
