#pragma once

#include <string>

#include "engine/train/config.h"

namespace shardscope {

// Which of the family-wide strategy options a strategy implements; asking a strategy for one it
// does not implement is a configuration error naming the option, not a silent no-op.
struct OptionSupport {
  bool reduce_dtype = false;             // gradients can travel in bf16
  bool offload = false;                  // ZeRO-Offload of optimizer state
  bool activation_checkpointing = true;  // per-block recomputation in backward
  bool sequence_parallel = false;        // tensor-parallel strategies only
  bool layout = false;  // tensor/pipeline/data-parallel degrees, micro-batches, schedule, dp sync
  bool data_parallel_sync = false;  // a choice of dp sync without the rest of a layout (cp)
  bool context_parallel = false;    // the cp degree
  bool expert_parallel = false;     // the ep degree
  // What blocks inside backward waiting for other ranks, if anything. On CUDA, autograd runs
  // every rank thread's backward on one device thread, so such a strategy cannot share a GPU in
  // threads mode: the ranks would wait on each other there until the timeout.
  std::string blocks_in_backward;
};

void validate_option_support(const Config& config, const OptionSupport& support);

}  // namespace shardscope
