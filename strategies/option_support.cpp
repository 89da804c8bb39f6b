#include "strategies/option_support.h"

namespace shardscope {

void validate_option_support(const Config& config, const OptionSupport& support) {
  const StrategyOptions& options = config.strategy_options;
  if (!support.reduce_dtype && options.reduce_dtype != "fp32") {
    throw ConfigError("strategy_options.reduce_dtype",
                      config.strategy +
                          " reduces gradients in fp32 only (bf16 reduction: "
                          "ddp_bucketed, zero1, zero2, fsdp)");
  }
  if (!support.offload && options.offload) {
    throw ConfigError("strategy_options.offload",
                      config.strategy +
                          " cannot offload its optimizer (ZeRO-Offload is for "
                          "zero1 compositions and zero2)");
  }
  if (!support.activation_checkpointing && options.activation_checkpointing) {
    throw ConfigError("strategy_options.activation_checkpointing",
                      config.strategy + " does not support activation checkpointing");
  }
  if (!support.sequence_parallel && options.sequence_parallel) {
    throw ConfigError("strategy_options.sequence_parallel",
                      config.strategy + " has no sequence-parallel form (it is an option of tp)");
  }
  if (!support.blocks_in_backward.empty() && config.device != "cpu" && config.world > 1 &&
      config.mode == "threads") {
    throw ConfigError("device", config.strategy +
                                    " on a shared CUDA device cannot run in threads mode (" +
                                    support.blocks_in_backward +
                                    " blocks autograd's single device thread); use the cpu");
  }
}

}  // namespace shardscope
