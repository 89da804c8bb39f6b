#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace shardscope {

// `text` as a terminal line can show it: control characters (a NUL in a config's value once cut
// the message there, since what() is a C string) become \xNN; line breaks stay.
std::string printable(const std::string& text);

// A configuration that cannot run. `field` names the offending key the way a user spells it in a
// config file (dotted, e.g. "model.heads"); the CLI maps it back to the flag.
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string field, const std::string& message)
      : std::runtime_error(printable(field + ": " + message)), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

struct ModelConfig {
  int vocab = 256;
  int d_model = 64;
  int heads = 4;
  int layers = 2;
  int seq = 32;
  int mlp_ratio = 4;
  bool tie_embeddings = false;      // LM head shares the token embedding
  std::vector<std::string> frozen;  // parameter names that get no gradient
  bool unused_parameter = false;    // adds a parameter the forward never touches (DDP corner case)
  // Mixture of experts: each block's MLP becomes `experts` MLPs of the same width and a learned
  // router sending every token to its `top_k` experts (0: the dense MLP).
  int experts = 0;
  int top_k = 2;
  // The kernels of each block's attention (engine/model/core_attention.h): "sdpa" (flash on a
  // GPU, no s x s matrix kept) or "unfused" (scores materialised, as Megatron-LM ran in 2022).
  std::string attention = "sdpa";
  // Selective recompute (Korthikanti et al. 2022): each block's attention runs again in backward
  // instead of keeping what it saved.
  bool selective_recompute = false;
};

struct OptimizerConfig {
  std::string name = "adamw";  // adamw | sgd
  double lr = 1e-3;
  double weight_decay = 0.01;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double momentum = 0.0;              // sgd only
  std::string schedule = "constant";  // constant | cosine | linear (decay after warm-up)
  int warmup_steps = 0;
  double min_lr_ratio = 0.1;    // floor of cosine/linear decay, as a fraction of lr
  double clip_grad_norm = 0.0;  // 0 disables clipping
};

struct StrategyOptions {
  // Gradient bucket cap in MiB; 0 means DDP's default: 25 MiB with a 1 MiB first bucket.
  double bucket_mb = 0.0;
  bool find_unused_parameters = false;  // torch_ddp: tolerate parameters without gradients
  bool overlap = true;             // ddp_bucketed: reduce buckets during backward (false: after it)
  bool prefetch = true;            // fsdp: start the next unit's all_gather while this one computes
  std::string precision = "fp32";  // fp32 | bf16 (bf16 compute, fp32 master weights)
  std::string reduce_dtype = "fp32";      // fp32 | bf16: dtype gradients travel in
  bool activation_checkpointing = false;  // recompute each block's activations in backward
  bool offload = false;                   // zero1/zero2: optimizer state and its step on the host
  bool sequence_parallel = false;         // tp: LayerNorm/residual regions split along the sequence
  // Layout of tp / pp / hybrid: tensor-, pipeline- and data-parallel degrees (0: derived; the
  // product must be the world size), pipeline micro-batches per step (0: as many as stages) and
  // schedule, and how the data-parallel dimension synchronises gradients.
  int tensor_parallel = 0;
  int pipeline_parallel = 0;
  int data_parallel = 0;
  int micro_batches = 0;
  // 1f1b | gpipe | interleaved-1f1b | zero-bubble | zbv | dualpipev
  // (strategies/pipeline/pipeline_schedule.h)
  std::string schedule = "1f1b";
  int stages_per_rank = 0;                          // virtual stages per rank (0: the schedule's)
  std::string data_parallel_sync = "ddp_bucketed";  // ddp_bucketed | torch_ddp | zero1
  // cp: ranks each sequence is split over (ring attention; 0: the whole world, the rest data).
  int context_parallel = 0;
  // ep: ranks a mixture's experts are spread over (E/ep each; 0: the whole world).
  int expert_parallel = 0;
};

// Deliberate failure for testing the failure path: rank `rank` throws at the start of `step`.
struct FaultInjection {
  int rank = -1;  // -1: none
  int step = 0;
  std::string kind = "throw";
  bool enabled() const { return rank >= 0; }
};

struct Config {
  std::string preset = "tiny";
  ModelConfig model;
  int world = 1;
  // threads | processes | auto: processes for ranks sharing a CUDA device (a GPU runs backward on
  // autograd's one device thread per process, which rank threads would share), else threads.
  std::string mode = "auto";
  std::string device = "cpu";  // cpu | cuda:N
  // shm (shared memory: ranks of one host) | gloo (TCP, any hosts) | nccl (one GPU per rank) | auto
  std::string backend = "shm";
  std::string strategy = "single";
  StrategyOptions strategy_options;
  int steps = 5;
  int micro_batch = 4;   // sequences per rank per micro-batch
  int global_batch = 0;  // if > 0: micro_batch is derived as global_batch / (world * grad_accum)
  int grad_accum = 1;
  OptimizerConfig optimizer;
  uint64_t seed = 1234;
  std::string data = "auto";  // auto (licence texts, else synthetic) | synthetic | path to a text
  int threads_per_rank = 0;   // intra-op threads per rank; 0 = launch_spec decides
  // Seconds a collective may wait before the run is failed as hung. 0 (the default): adaptive,
  // max(5 s, 10 x the slowest step so far) once steps are timed, and kSetupTimeoutS while ranks
  // connect, before the first steps and around checkpoints.
  int collective_timeout_s = 0;
  // A simulated device capacity per rank, in MB (CPU runs): an allocation past it fails as an
  // out-of-memory error with the rank's memory breakdown. 0: no limit.
  double memory_limit_mb = 0;
  bool reference = true;  // train the single-device reference and compare
  bool tracing = true;    // record host spans and communication calls (the trace)
  // On a GPU, also record kernels, copies and runtime calls with CUPTI (when tracing is on).
  bool device_tracing = true;
  // Ranks that share one device (rank threads, or rank processes on one host, over Gloo) take
  // turns on it for their compute, so each rank's compute is timed as if it had the device to
  // itself: the clean durations device time is built from. `contended` lets them compute at once,
  // fighting over the device, for the raw wall-clock picture (the step itself gets faster).
  bool contended = false;
  // Whether this run's ranks take turns (they share a device and are not told to contend).
  bool takes_turns() const { return !contended && backend != "nccl"; }
  FaultInjection fault;
  // Checkpoints: every `checkpoint_every` steps (0: only when a signal stops the run) into
  // `checkpoint_dir`. `resume` is a checkpoint directory to continue from (its newest valid
  // checkpoint); the run then trains the steps after it.
  int checkpoint_every = 0;
  int checkpoint_keep = 3;  // the newest K checkpoints stay; older ones are removed (0: all stay)
  std::string checkpoint_dir;
  std::string resume;
  // A name -> tensor file (torch.save of a state_dict, or safetensors) every rank and the
  // reference start from instead of the seeded initialisation. Empty: the seed's weights.
  std::string init_weights;

  // Sequences in one optimizer step across all ranks.
  int global_batch_size() const { return micro_batch * world * grad_accum; }
};

// The bound on waits that are not a step's collectives (connecting, the first steps, checkpoints)
// when the collective timeout is adaptive; the fixed timeout when one is given.
constexpr int kSetupTimeoutS = 60;
inline int setup_timeout_s(const Config& config) {
  return config.collective_timeout_s > 0 ? config.collective_timeout_s : kSetupTimeoutS;
}

// Model shapes of a named preset (tiny, small, gpt2-small).
ModelConfig preset_model(const std::string& name);
std::vector<std::string> preset_names();

// Builds a configuration: defaults, then the preset named in `overrides` (if any), then every
// other key of `overrides`. Unknown keys and wrongly typed values are ConfigErrors.
Config config_from_json(const nlohmann::json& overrides);
void apply_json(Config& config, const nlohmann::json& overrides);
nlohmann::json to_json(const Config& config);

// Rejects every combination that cannot run, before any rank starts.
void validate(const Config& config);
// What a configuration is, whatever runs it and wherever: the model, the optimizer, the strategy
// and its options, as its strategy checks them. Not this machine's bounds, placement, steps or
// how the batch divides over ranks (`project` prices configurations too big to run here, whose
// batch need not divide over every rank as a run's must).
void validate_structure(const Config& config);
// Validates, then derives what other fields imply (micro_batch from global_batch).
void finalize(Config& config);

// Makes `backend` concrete for a machine with `visible_gpus` GPUs and says what was chosen:
// auto is NCCL when there are at least as many GPUs as ranks (one each), Gloo on a shared cuda:0
// when there are fewer, Gloo on the CPU for a CPU run. NCCL without enough GPUs is a ConfigError.
std::string resolve_backend(Config& config, int visible_gpus);

// Parses "rank=2,step=3,kind=throw".
FaultInjection parse_fault(const std::string& text);

}  // namespace shardscope
