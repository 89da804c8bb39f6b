#pragma once

#include <functional>
#include <memory>

#include <torch/torch.h>

#include "engine/model/gpt_model.h"
#include "engine/model/token_data.h"
#include "engine/train/config.h"

namespace shardscope::perf {

// One device's training in LibTorch alone: our GPT, its optimizer and its batches, and nothing of
// the trainer (no strategy, spans or memory tracking). What the engine section times against the
// trainer, and what the host-ops census counts.
class PlainLoop {
 public:
  enum class Phase { kForward, kBackward, kOptimizer };
  // Runs one phase of a step: `phase` says which; calling `fn` runs it.
  using PhaseRunner = std::function<void(Phase phase, const std::function<void()>& fn)>;

  explicit PlainLoop(const Config& config);
  // Step `step`: gradients cleared, its batch on the device, then the forward (in the config's
  // precision), the backward and the optimizer's step, each through `run` when one is given.
  // Returns the loss.
  torch::Tensor step(int step, const PhaseRunner& run = {});

 private:
  const Config config_;
  c10::Device device_;
  GptModel model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<BatchSampler> sampler_;
};

}  // namespace shardscope::perf
