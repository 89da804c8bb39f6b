#pragma once

#include <string>

namespace shardscope {

// Which of the family-wide strategy options a strategy reads. Declared with the strategy (its
// traits), so that the Launch form offers only these, and the validation refuses the gated ones
// it does not implement (a configuration error naming the option, not a silent no-op).
struct OptionSupport {
  bool reduce_dtype = false;             // gradients can travel in bf16
  bool offload = false;                  // ZeRO-Offload of optimizer state
  bool activation_checkpointing = true;  // per-block recomputation in backward
  bool sequence_parallel = false;        // tensor-parallel strategies only
  bool layout = false;  // tensor/pipeline/data-parallel degrees, micro-batches, schedule, dp sync
  bool data_parallel_sync = false;      // a choice of dp sync without the rest of a layout (cp)
  bool context_parallel = false;        // the cp degree
  bool expert_parallel = false;         // the ep degree
  bool buckets = false;                 // bucket_mb: gradients reduced in buckets of that size
  bool overlap = false;                 // buckets reduced during backward, or after it
  bool prefetch = false;                // the next unit's all_gather under this one's compute
  bool find_unused_parameters = false;  // parameters without gradients are tolerated
  // What blocks inside backward waiting for other ranks, if anything. On CUDA, autograd runs
  // every rank thread's backward on one device thread, so such a strategy cannot share a GPU in
  // threads mode: the ranks would wait on each other there until the timeout.
  std::string blocks_in_backward;

  // Whether the strategy reads configuration key `key` ("strategy_options.bucket_mb"). Keys
  // outside strategy_options, and those every strategy reads (precision), are always offered.
  bool offers(const std::string& key) const;

  // No option at all: what a composition starts its additions from.
  static OptionSupport none();
  // Every option either reads (a composition: its base's options and its own additions).
  OptionSupport joined(const OptionSupport& more) const;
};

}  // namespace shardscope
