#include "strategies/common/option_support.h"

#include "engine/launch/backward_thread.h"

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
  if (!support.layout) {
    const StrategyOptions defaults;
    const auto reject_if = [&](bool set, const char* field) {
      if (set) {
        throw ConfigError(field, config.strategy +
                                     " has no parallel layout (degrees, micro-batches, schedule "
                                     "and dp sync are options of tp, pp and hybrid)");
      }
    };
    reject_if(options.tensor_parallel != 0, "strategy_options.tensor_parallel");
    reject_if(options.pipeline_parallel != 0, "strategy_options.pipeline_parallel");
    reject_if(options.data_parallel != 0, "strategy_options.data_parallel");
    reject_if(options.micro_batches != 0, "strategy_options.micro_batches");
    reject_if(options.schedule != defaults.schedule, "strategy_options.schedule");
    reject_if(options.stages_per_rank != 0, "strategy_options.stages_per_rank");
    if (!support.data_parallel_sync) {
      reject_if(options.data_parallel_sync != defaults.data_parallel_sync,
                "strategy_options.data_parallel_sync");
    }
  }
  if (!support.context_parallel && options.context_parallel != 0) {
    throw ConfigError("strategy_options.context_parallel",
                      config.strategy + " does not split sequences (the cp degree is cp's option)");
  }
  if (!support.expert_parallel && options.expert_parallel != 0) {
    throw ConfigError("strategy_options.expert_parallel",
                      config.strategy + " does not spread experts (the ep degree is ep's option)");
  }
  // Only a device shared by rank threads has the problem (NCCL gives each rank its own GPU; auto
  // is checked again once it is resolved). The CPU emulation of a GPU's backward thread
  // (SHARDSCOPE_BACKWARD_THREAD=1) has it too.
  if (!support.blocks_in_backward.empty() &&
      (config.device != "cpu" || backward_thread_emulated()) && config.world > 1 &&
      config.mode == "threads" && config.backend != "nccl") {
    throw ConfigError("mode", config.strategy + " cannot run its ranks as threads sharing " +
                                  config.device + ": " + support.blocks_in_backward +
                                  " waits on autograd's device thread, which every rank thread "
                                  "of a process shares; use --mode processes");
  }
}

}  // namespace shardscope
