#include "app/gui/launch_form.h"

namespace shardscope::gui {

namespace {

using Kind = FormField::Kind;

FormField choice(std::string key, std::string label, std::vector<std::string> choices = {}) {
  return {std::move(key), std::move(label), Kind::kChoice, std::move(choices), ""};
}
FormField integer(std::string key, std::string label) {
  return {std::move(key), std::move(label), Kind::kInteger, {}, ""};
}
FormField real(std::string key, std::string label) {
  return {std::move(key), std::move(label), Kind::kReal, {}, ""};
}
FormField text(std::string key, std::string label, std::string hint) {
  return {std::move(key), std::move(label), Kind::kText, {}, std::move(hint)};
}
FormField flag(std::string key, std::string label) {
  return {std::move(key), std::move(label), Kind::kFlag, {}, ""};
}

}  // namespace

const std::vector<FormSection>& launch_form_sections() {
  static const std::vector<FormSection> sections = {
      {"model and run",
       {choice("preset", "preset"),
        integer("model.layers", "layers"),
        integer("model.d_model", "d_model"),
        integer("model.heads", "heads"),
        integer("model.seq", "seq"),
        integer("model.vocab", "vocabulary"),
        integer("model.mlp_ratio", "MLP ratio"),
        integer("model.experts", "experts (0: dense MLP)"),
        integer("model.top_k", "top-k experts"),
        flag("model.tie_embeddings", "tie embeddings"),
        choice("model.attention", "attention kernels (unfused: s x s scores kept)",
               {"sdpa", "unfused"}),
        flag("model.selective_recompute", "selective recompute (attention again in backward)"),
        flag("model.unused_parameter",
             "add a parameter forward never uses (DDP's unused-parameter case)"),
        integer("steps", "steps"),
        integer("world", "world size"),
        choice("mode", "mode", {"auto", "threads", "processes"}),
        choice("device", "device", {"cpu", "cuda", "cuda:0"}),
        choice("backend", "backend", {"auto", "shm", "gloo", "nccl"}),
        integer("micro_batch", "micro-batch (sequences per rank)"),
        integer("global_batch", "global batch (0: micro-batch x world x accumulation)"),
        integer("grad_accum", "gradient accumulation")}},
      {"strategy",
       {choice("strategy", "strategy"),
        real("strategy_options.bucket_mb", "bucket MB (0: automatic, at least 3 buckets)"),
        flag("strategy_options.overlap", "overlap communication with backward"),
        flag("strategy_options.prefetch", "prefetch (fsdp)"),
        flag("strategy_options.find_unused_parameters", "find unused parameters"),
        integer("strategy_options.tensor_parallel", "tensor parallel degree"),
        integer("strategy_options.pipeline_parallel", "pipeline parallel degree"),
        integer("strategy_options.data_parallel", "data parallel degree"),
        integer("strategy_options.micro_batches", "pipeline micro-batches"),
        choice("strategy_options.schedule", "schedule"),
        integer("strategy_options.stages_per_rank", "stages per rank (0: the schedule's)"),
        integer("strategy_options.context_parallel", "context parallel degree (cp)"),
        integer("strategy_options.expert_parallel", "expert parallel degree (ep)"),
        choice("strategy_options.data_parallel_sync", "data-parallel sync"),
        flag("strategy_options.sequence_parallel", "sequence parallel"),
        choice("strategy_options.precision", "precision", {"fp32", "bf16"}),
        choice("strategy_options.reduce_dtype", "gradients travel in", {"fp32", "bf16"}),
        flag("strategy_options.activation_checkpointing", "activation checkpointing"),
        flag("strategy_options.offload", "offload optimizer state to the host (zero1, zero2)")}},
      {"optimizer",
       {choice("optimizer.name", "optimizer", {"adamw", "sgd"}),
        real("optimizer.lr", "learning rate"), real("optimizer.weight_decay", "weight decay"),
        real("optimizer.beta1", "beta1"), real("optimizer.beta2", "beta2"),
        real("optimizer.eps", "eps"), real("optimizer.momentum", "momentum (sgd)"),
        choice("optimizer.schedule", "lr schedule", {"constant", "cosine", "linear"}),
        integer("optimizer.warmup_steps", "warm-up steps"),
        real("optimizer.min_lr_ratio", "min lr ratio (decay floor)"),
        real("optimizer.clip_grad_norm", "clip gradient norm (0: off)")},
       true},
      {"timing, memory and checks",
       {flag("contended",
             "ranks compute at once, contending for the device (off: they take "
             "turns, for clean device time)"),
        flag("device_tracing",
             "on a GPU, record kernels with CUPTI (off: host spans only; CUPTI adds about 10 us "
             "to each kernel launch)"),
        integer("threads_per_rank", "threads per rank (0: all cores but one, taking turns)"),
        integer("collective_timeout_s", "collective timeout s (0: adaptive)"),
        real("memory_limit_mb", "memory limit MB per rank (0: none)"),
        flag("reference", "check against a single-device reference"), integer("seed", "seed"),
        text("data", "data", "auto | synthetic | a text file"),
        text("init_weights", "initial weights", "a state_dict or .safetensors file")},
       true},
      {"checkpoints (a stopped or failed run can then be resumed)",
       {integer("checkpoint_every", "checkpoint every (steps; 0: only when stopped)"),
        integer("checkpoint_keep", "checkpoints kept (0: all)"),
        text("checkpoint_dir", "checkpoint directory", "none"),
        text("resume", "resume from", "a checkpoint directory")}}};
  return sections;
}

const std::vector<OmittedKey>& launch_form_omitted_keys() {
  static const std::vector<OmittedKey> omitted = {
      // Fault injection is for testing the failure path (`run --inject-fault`), not a setting.
      {"inject_fault", "fault injection is for tests of the failure path"},
      // The GUI shows what the trace recorded: a run without it would show nothing.
      {"tracing", "the GUI needs the trace to show the run"},
      // A list of parameter names (`--frozen`), a config file's job; the names depend on the
      // model chosen above.
      {"model.frozen", "a list of parameter names: give it in a config file"}};
  return omitted;
}

}  // namespace shardscope::gui
