#include "tests/support/bad_configs.h"

#include <cctype>

namespace shardscope::test {

std::vector<BadConfigCase> bad_config_cases() {
  return {
      {R"({"world":0})", "world", "at least 1"},
      {R"({"world":-3})", "world", "at least 1"},
      {R"({"world":1000})", "world", "at most 64"},
      {R"({"world":"four"})", "world", "expected an integer"},
      {R"({"strategy":"nope"})", "strategy", "unknown strategy 'nope'"},
      {R"({"strategy":"single","world":2})", "world", "exactly one rank"},
      {R"({"mode":"processes","strategy":"torch_ddp","world":2,"inject_fault":"rank=5"})",
       "inject_fault", "does not exist"},
      {R"({"inject_fault":"rank=0,kind=hang"})", "inject_fault", "needs --mode processes"},
      {R"({"mode":"fibers"})", "mode", "unknown mode"},
      {R"({"device":"tpu"})", "device", "expected cpu or cuda:N"},
      {R"({"device":"cuda:x"})", "device", "expected cpu or cuda:N"},
      {R"({"backend":"mpi"})", "backend", "unknown backend"},
      {R"({"backend":"nccl"})", "backend", "GPUs only"},
      {R"({"preset":"huge"})", "preset", "unknown preset"},
      {R"({"model":{"heads":5}})", "model.heads", "do not divide d_model"},
      {R"({"model":{"heads":0}})", "model.heads", "must be positive"},
      {R"({"model":{"d_model":0}})", "model.d_model", "must be positive"},
      {R"({"model":{"layers":0}})", "model.layers", "must be positive"},
      {R"({"model":{"seq":0}})", "model.seq", "must be positive"},
      {R"({"model":{"mlp_ratio":0}})", "model.mlp_ratio", "must be positive"},
      {R"({"model":{"vocab":100}})", "model.vocab", "at least 256"},
      {R"({"model":{"vocab":1},"data":"synthetic"})", "model.vocab", "at least 2"},
      {R"({"model":{"colour":"red"}})", "model.colour", "unknown key"},
      {R"({"stepz":3})", "stepz", "unknown key"},
      {R"({"steps":0})", "steps", "at least 1"},
      {R"({"micro_batch":0})", "micro_batch", "at least 1"},
      {R"({"grad_accum":0})", "grad_accum", "at least 1"},
      {R"({"strategy":"torch_ddp","world":4,"global_batch":10})", "global_batch",
       "do not divide evenly"},
      {R"({"global_batch":-1})", "global_batch", "must not be negative"},
      {R"({"threads_per_rank":-1})", "threads_per_rank", "must not be negative"},
      {R"({"collective_timeout_s":0})", "collective_timeout_s", "at least 1 second"},
      {R"({"seed":-5})", "seed", "non-negative integer"},
      {R"({"optimizer":{"name":"lamb"}})", "optimizer.name", "unknown optimizer"},
      {R"({"optimizer":{"lr":0}})", "optimizer.lr", "must be positive"},
      {R"({"optimizer":{"lr":"fast"}})", "optimizer.lr", "expected a number"},
      {R"({"optimizer":{"beta1":1.0}})", "optimizer.beta1", "[0, 1)"},
      {R"({"optimizer":{"beta2":-0.1}})", "optimizer.beta2", "[0, 1)"},
      {R"({"optimizer":{"eps":0}})", "optimizer.eps", "must be positive"},
      {R"({"optimizer":{"weight_decay":-1}})", "optimizer.weight_decay", "must not be negative"},
      {R"({"optimizer":{"momentum":-1}})", "optimizer.momentum", "must not be negative"},
      {R"({"optimizer":{"schedule":"step"}})", "optimizer.schedule", "unknown schedule"},
      {R"({"optimizer":{"warmup_steps":-2}})", "optimizer.warmup_steps", "must not be negative"},
      {R"({"optimizer":{"min_lr_ratio":2}})", "optimizer.min_lr_ratio", "[0, 1]"},
      {R"({"optimizer":{"clip_grad_norm":-1}})", "optimizer.clip_grad_norm",
       "must not be negative"},
      {R"({"strategy_options":{"bucket_mb":-1}})", "strategy_options.bucket_mb",
       "must not be negative"},
      {R"({"strategy":"torch_ddp","world":2,"model":{"unused_parameter":true}})",
       "strategy_options.find_unused_parameters", "gets no gradient"},
      {R"({"strategy":"torch_ddp","world":2,"device":"cuda:0"})", "device", "threads mode"},
      {R"({"strategy_options":{"find_unused_parameters":"yes"}})",
       "strategy_options.find_unused_parameters", "expected true or false"},
      {R"({"inject_fault":"rank=5"})", "inject_fault", "does not exist at world"},
      {R"({"inject_fault":"rank=0,step=99"})", "inject_fault", "past the last step"},
      {R"({"inject_fault":"rank=0,kind=segv"})", "inject_fault",
       "kind must be throw, exit or hang"},
      {R"({"reference":"no"})", "reference", "expected true or false"},
      {R"({"strategy_options":{"precision":"fp8"}})", "strategy_options.precision",
       "unknown precision"},
      {R"({"strategy_options":{"reduce_dtype":"fp16"}})", "strategy_options.reduce_dtype",
       "unknown reduce dtype"},
      {R"({"strategy":"ddp_bucketed","world":2,"strategy_options":{"offload":true}})",
       "strategy_options.offload", "cannot offload"},
      {R"({"strategy":"fsdp","world":2,"strategy_options":{"offload":true}})",
       "strategy_options.offload", "cannot offload"},
      {R"({"strategy":"ddp_flat","world":2,"strategy_options":{"reduce_dtype":"bf16"}})",
       "strategy_options.reduce_dtype", "fp32 only"},
      {R"({"strategy":"torch_ddp","world":2,"strategy_options":{"activation_checkpointing":true}})",
       "strategy_options.activation_checkpointing", "does not support"},
      {R"({"strategy":"fsdp","world":2,"device":"cuda:0"})", "device", "threads mode"},
      {R"({"strategy":"zero2","world":2,"model":{"unused_parameter":true}})",
       "strategy_options.find_unused_parameters", "gets no gradient"},
      {R"({"strategy":"tp","world":3})", "model.heads", "tensor-parallel degree"},
      {R"({"strategy":"tp","world":8,"model":{"heads":8,"vocab":260}})", "model.vocab",
       "tensor-parallel degree"},
      {R"({"strategy":"ddp_bucketed","world":2,"strategy_options":{"sequence_parallel":true}})",
       "strategy_options.sequence_parallel", "option of tp"},
      {R"({"strategy":"tp","world":4,"model":{"seq":30},"strategy_options":{"sequence_parallel":true}})",
       "model.seq", "tensor-parallel degree"},
      {R"({"strategy_options":{"prefetch":1}})", "strategy_options.prefetch",
       "expected true or false"},
      {R"({"strategy":"pp","world":4})", "strategy_options.pipeline_parallel",
       "every stage needs at least one block"},
      {R"({"strategy":"pp","world":2,"strategy_options":{"micro_batches":3}})",
       "strategy_options.micro_batches", "do not divide"},
      {R"({"strategy":"pp","world":2,"strategy_options":{"schedule":"zigzag"}})",
       "strategy_options.schedule", "unknown pipeline schedule"},
      {R"({"strategy":"pp","world":2,"model":{"tie_embeddings":true}})", "model.tie_embeddings",
       "untied embeddings"},
      {R"({"strategy":"hybrid","world":8,"strategy_options":{"tensor_parallel":2,"data_parallel":3}})",
       "strategy_options.data_parallel", "not the world size"},
      {R"({"strategy":"hybrid","world":4,"strategy_options":{"data_parallel_sync":"fsdp"}})",
       "strategy_options.data_parallel_sync", "unknown data-parallel sync"},
      {R"({"strategy":"tp","world":4,"strategy_options":{"tensor_parallel":3}})",
       "strategy_options.tensor_parallel", "do not divide the world size"},
      {R"({"strategy":"zero2","world":2,"strategy_options":{"micro_batches":2}})",
       "strategy_options.micro_batches", "no parallel layout"},
      {R"({"strategy_options":{"pipeline_parallel":-1}})", "strategy_options.pipeline_parallel",
       "must not be negative"},
  };
}

std::string bad_config_name(const BadConfigCase& c) {
  std::string name;
  for (char ch : c.json) {
    if (std::isalnum(static_cast<unsigned char>(ch))) {
      name += ch;
    } else if (!name.empty() && name.back() != '_') {
      name += '_';
    }
  }
  while (!name.empty() && name.back() == '_') name.pop_back();
  return name;
}

}  // namespace shardscope::test
