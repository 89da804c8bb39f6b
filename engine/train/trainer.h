#pragma once

#include <functional>
#include <vector>

#include "engine/launch/backward_thread.h"
#include "engine/launch/rank_context.h"
#include "engine/model/gpt_model.h"
#include "engine/train/strategy.h"

namespace shardscope {

struct StepRecord {
  int step = 0;
  double loss = 0.0;  // mean over ranks (this rank's own loss in `local_loss`)
  double local_loss = 0.0;
  double step_time_s = 0.0;  // slowest rank
  double local_step_time_s = 0.0;
  double lr = 0.0;
  // Tokens this rank's routers sent to each expert this step, [layer * experts + expert]
  // (a mixture of experts; empty otherwise).
  std::vector<int64_t> routed_tokens;
};

struct RankResult {
  int rank = 0;
  std::vector<StepRecord> steps;
  NamedTensors weights;  // full weights on the CPU
  bool replicated = true;
  MemoryBytes memory;
  int first_step = 0;         // steps a resumed run's checkpoint had done
  int checkpoint_step = -1;   // steps done at the last checkpoint this run wrote (-1: none)
  int stopped_by_signal = 0;  // the signal that stopped training early (0: it ran to the end)
  bool reports_loss = true;   // false: a pipeline stage before the last, which computes no loss
  // The device caching allocator's peak over training, where the rank has its process to itself
  // (torch.cuda.max_memory_allocated; 0 on a CPU or when ranks share a process).
  int64_t device_allocator_peak_bytes = 0;
  // Where its backward passes ran (SHARDSCOPE_BACKWARD_THREAD=1: engine/launch/backward_thread.h).
  BackwardThreadCounts backward_thread;
};

using StepCallback = std::function<void(const StepRecord&)>;

// The training loop every strategy shares: zero-grad, micro-batches (forward, loss, backward),
// gradient sync, optional clipping, optimizer step; the loss is averaged across ranks for
// reporting. `on_step` is called on rank 0 after each step.
RankResult train_rank(RankContext& ctx, Strategy& strategy, const StepCallback& on_step = {});

}  // namespace shardscope
