#include "engine/train/option_support.h"

#include <map>

namespace shardscope {

bool OptionSupport::offers(const std::string& key) const {
  const bool sync = layout || data_parallel_sync;
  const std::map<std::string, bool> gated = {
      {"strategy_options.reduce_dtype", reduce_dtype},
      {"strategy_options.offload", offload},
      {"strategy_options.activation_checkpointing", activation_checkpointing},
      {"strategy_options.sequence_parallel", sequence_parallel},
      {"strategy_options.tensor_parallel", layout},
      {"strategy_options.pipeline_parallel", layout},
      {"strategy_options.data_parallel", layout},
      {"strategy_options.micro_batches", layout},
      {"strategy_options.schedule", layout},
      {"strategy_options.stages_per_rank", layout},
      {"strategy_options.data_parallel_sync", sync},
      {"strategy_options.context_parallel", context_parallel},
      {"strategy_options.expert_parallel", expert_parallel},
      {"strategy_options.bucket_mb", buckets},
      {"strategy_options.overlap", overlap},
      {"strategy_options.prefetch", prefetch},
      {"strategy_options.find_unused_parameters", find_unused_parameters},
  };
  const auto it = gated.find(key);
  return it == gated.end() || it->second;
}

OptionSupport OptionSupport::none() {
  OptionSupport support;
  support.activation_checkpointing = false;
  return support;
}

OptionSupport OptionSupport::joined(const OptionSupport& more) const {
  OptionSupport both = *this;
  both.reduce_dtype |= more.reduce_dtype;
  both.offload |= more.offload;
  both.activation_checkpointing |= more.activation_checkpointing;
  both.sequence_parallel |= more.sequence_parallel;
  both.layout |= more.layout;
  both.data_parallel_sync |= more.data_parallel_sync;
  both.context_parallel |= more.context_parallel;
  both.expert_parallel |= more.expert_parallel;
  both.buckets |= more.buckets;
  both.overlap |= more.overlap;
  both.prefetch |= more.prefetch;
  both.find_unused_parameters |= more.find_unused_parameters;
  if (both.blocks_in_backward.empty()) both.blocks_in_backward = more.blocks_in_backward;
  return both;
}

}  // namespace shardscope
