#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "engine/launch/rank_context.h"
#include "engine/model/batch.h"
#include "engine/model/gpt_model.h"

namespace shardscope {

class StateBinding;

// Bytes a rank holds, by category (the profiling issue turns this into counters over time).
struct MemoryBytes {
  int64_t parameters = 0;
  int64_t gradients = 0;
  int64_t optimizer_state = 0;
  int64_t comm_buffers = 0;  // e.g. DDP's gradient buckets, FSDP's gathered units
  // Kept in host memory instead (ZeRO-Offload: fp32 master copy and optimizer state). On a CPU
  // run both live in the same memory, but this is what would leave the GPU.
  int64_t host = 0;
};

// How one rank trains: builds its model and optimizer, runs forward/backward on its micro-
// batches, synchronises gradients, steps, and can hand back the full weights for checking.
// The trainer drives it; the loop itself is the same for every strategy.
class Strategy {
 public:
  virtual ~Strategy() = default;

  virtual void setup(RankContext& ctx) = 0;
  // Forward and backward of one micro-batch with the loss scaled by `loss_scale`; `last_micro`
  // marks the micro-batch after which gradients must be synchronised. Returns the unscaled loss.
  virtual torch::Tensor forward_backward(const Batch& batch, bool last_micro,
                                         double loss_scale) = 0;
  // Completes gradient synchronisation begun during backward (or does all of it).
  virtual void sync_gradients() {}
  // Global gradient norm (before clipping), after scaling the gradients to at most `max_norm`.
  virtual double clip_gradients(double max_norm) = 0;
  virtual void optimizer_step(double lr) = 0;
  virtual void zero_grad() = 0;
  // The full trained weights on the CPU, name -> tensor (gathered where the strategy shards).
  virtual NamedTensors full_weights() = 0;
  // Whether the loss forward_backward returns is this rank's to report (a pipeline's earlier
  // stages compute none); the reported loss is the mean over the ranks that report.
  virtual bool reports_loss() const { return true; }
  // The timeline's name for the span around accumulation micro-batch `micro` (the trainer's):
  // a pipeline runs its own micro-batches inside it, and says so rather than "micro-batch 0".
  virtual std::string accumulation_span_name(int micro) const {
    return "micro-batch " + std::to_string(micro);
  }
  // Whether every rank holds every weight (then ranks must agree bitwise).
  virtual bool replicated() const = 0;
  virtual MemoryBytes memory() const = 0;
  // Checkpointing: tells `binding` where each part of the model's training state (weights and
  // optimizer state) lives on this rank and which parts this rank writes. Called after setup.
  virtual void bind_state(StateBinding& binding) = 0;
  // Tokens this rank's routers sent to each expert since the last call, [layer * experts +
  // expert] (GptModelImpl::take_routed_tokens); empty without experts or where not counted.
  virtual std::vector<int64_t> take_routed_tokens() { return {}; }
};

}  // namespace shardscope
