#include "app/cli/cli_flags.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "engine/train/config.h"
#include "engine/train/config_json.h"
#include "profiling/io/input_file.h"

namespace shardscope::cli {
namespace {

using Kind = FlagSpec::Kind;

nlohmann::json parse_value(const FlagSpec& spec, const std::string& text) {
  auto fail = [&](const std::string& what) {
    throw ConfigError(spec.key, what + ", got '" + text + "'");
  };
  switch (spec.kind) {
    case Kind::Int:
    case Kind::Uint: {
      errno = 0;
      char* end = nullptr;
      long long v = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || errno == ERANGE) fail("expected an integer");
      if (spec.kind == Kind::Uint && v < 0) fail("expected a non-negative integer");
      if (spec.kind == Kind::Uint) return nlohmann::json(static_cast<uint64_t>(v));
      return nlohmann::json(static_cast<int64_t>(v));
    }
    case Kind::Double: {
      errno = 0;
      char* end = nullptr;
      double v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || errno == ERANGE) fail("expected a number");
      if (!std::isfinite(v)) fail("expected a finite number");
      return nlohmann::json(v);
    }
    case Kind::List: {
      nlohmann::json list = nlohmann::json::array();
      std::stringstream parts(text);
      std::string part;
      while (std::getline(parts, part, ',')) {
        if (part.empty()) fail("expected comma-separated names, none of them empty");
        list.push_back(part);
      }
      if (list.empty() || text.back() == ',')
        fail("expected comma-separated names, none of them empty");
      return list;
    }
    case Kind::String:
    case Kind::Bool:
    case Kind::BoolOff:
      break;
  }
  return nlohmann::json(text);
}

std::string key_pointer(const std::string& key) {
  std::string pointer = "/" + key;
  std::replace(pointer.begin(), pointer.end(), '.', '/');
  return pointer;
}

const char* type_name(Kind kind) {
  switch (kind) {
    case Kind::Int:
      return "INT";
    case Kind::Uint:
      return "UINT";
    case Kind::Double:
      return "FLOAT";
    case Kind::List:
      return "NAME,...";
    case Kind::String:
      return "TEXT";
    case Kind::Bool:
    case Kind::BoolOff:
      break;
  }
  return "";
}

// A default as the user would type it: strings bare, and "none" for an empty one.
std::string default_text(const nlohmann::json& value) {
  if (value.is_string())
    return value.get<std::string>().empty() ? "none" : value.get<std::string>();
  if (value.is_array()) return value.empty() ? "none" : value.dump();
  return value.dump();
}

}  // namespace

namespace {

// What runs, where, for how long, over what data.
std::vector<FlagSpec> placement_flag_specs() {
  return {
      {"--preset", "preset", Kind::String,
       "model preset: tiny (<1M params), small (~10M), gpt2-small (~124M); for projections: "
       "gpt-7b, llama-7b-like, megatron-22b, gpt3-175b, turing-530b, megatron-1t"},
      {"--strategy", "strategy", Kind::String, "training strategy (see `shardscope strategies`)"},
      {"--world", "world", Kind::Int, "number of ranks"},
      {"--mode", "mode", Kind::String,
       "how ranks run: threads (one process), processes (one process per rank, over a TCPStore), "
       "or auto: processes for ranks sharing a CUDA device, else threads"},
      {"--device", "device", Kind::String, "cpu or cuda:N (ranks share it)"},
      {"--backend", "backend", Kind::String,
       "collective backend: shm (shared memory, ranks of one host; the default), gloo (TCP; ranks "
       "on several hosts), nccl (one GPU per rank) or auto (nccl with a GPU per rank, else shm)"},
      {"--steps", "steps", Kind::Int, "optimizer steps"},
      {"--micro-batch", "micro_batch", Kind::Int, "sequences per rank per micro-batch"},
      {"--global-batch", "global_batch", Kind::Int,
       "sequences per step over all ranks (sets the micro-batch; must divide by world x "
       "accumulation)"},
      {"--grad-accum", "grad_accum", Kind::Int, "micro-batches accumulated per optimizer step"},
      {"--seed", "seed", Kind::Uint, "seed of initialisation and data order"},
      {"--data", "data", Kind::String, "auto (licence texts), synthetic, or a text file"},
      {"--threads-per-rank", "threads_per_rank", Kind::Int,
       "intra-op threads per rank (0: taking turns, all cores but one on a CPU, where the "
       "collectives run; --contended: cores / world)"},
      {"--timeout", "collective_timeout_s", Kind::Int,
       "seconds before a stuck collective fails the run (0: adaptive, max(5 s, 10 x the slowest "
       "step so far), 60 s before steps are timed)"},
      {"--memory-limit-mb", "memory_limit_mb", Kind::Double,
       "simulated device capacity per rank in MB (CPU): past it the run fails out of memory, "
       "with the rank's memory breakdown"},
  };
}

// The GPT's shape.
std::vector<FlagSpec> model_flag_specs() {
  return {
      {"--vocab", "model.vocab", Kind::Int, "vocabulary size"},
      {"--d-model", "model.d_model", Kind::Int, "model width"},
      {"--heads", "model.heads", Kind::Int, "attention heads (must divide d-model)"},
      {"--layers", "model.layers", Kind::Int, "transformer blocks"},
      {"--seq", "model.seq", Kind::Int, "sequence length"},
      {"--mlp-ratio", "model.mlp_ratio", Kind::Int, "MLP hidden width / d-model"},
      {"--experts", "model.experts", Kind::Int,
       "mixture of experts: MLPs per block, each token routed to --top-k of them (0: dense)"},
      {"--top-k", "model.top_k", Kind::Int, "experts each token is sent to (with --experts)"},
      {"--tie-embeddings", "model.tie_embeddings", Kind::Bool,
       "share the token embedding with the LM head"},
      {"--freeze", "model.frozen", Kind::List, "comma-separated parameter names to freeze"},
      {"--unused-parameter", "model.unused_parameter", Kind::Bool,
       "add a parameter the forward never uses (DDP corner case)"},
  };
}

// The optimizer and its schedule.
std::vector<FlagSpec> optimizer_flag_specs() {
  return {
      {"--optimizer", "optimizer.name", Kind::String, "adamw or sgd"},
      {"--lr", "optimizer.lr", Kind::Double, "peak learning rate"},
      {"--weight-decay", "optimizer.weight_decay", Kind::Double, "decoupled weight decay"},
      {"--momentum", "optimizer.momentum", Kind::Double, "SGD momentum"},
      {"--beta1", "optimizer.beta1", Kind::Double, "AdamW beta1"},
      {"--beta2", "optimizer.beta2", Kind::Double, "AdamW beta2"},
      {"--eps", "optimizer.eps", Kind::Double, "AdamW epsilon"},
      {"--lr-schedule", "optimizer.schedule", Kind::String, "constant, cosine or linear"},
      {"--warmup-steps", "optimizer.warmup_steps", Kind::Int, "linear warm-up steps"},
      {"--min-lr-ratio", "optimizer.min_lr_ratio", Kind::Double, "decay floor as a fraction of lr"},
      {"--clip-grad-norm", "optimizer.clip_grad_norm", Kind::Double,
       "clip the global gradient norm (0: off)"},
  };
}

// The strategy's options, its layout, and what is recorded.
std::vector<FlagSpec> strategy_flag_specs() {
  return {
      {"--bucket-mb", "strategy_options.bucket_mb", Kind::Double,
       "DDP bucket cap in MiB (0: DDP's default, 25 with a 1 MiB first bucket)"},
      {"--no-overlap", "strategy_options.overlap", Kind::BoolOff,
       "ddp_bucketed: reduce all buckets after backward instead of during it"},
      {"--no-prefetch", "strategy_options.prefetch", Kind::BoolOff,
       "fsdp: gather each unit only when it is needed (no overlap with compute)"},
      {"--precision", "strategy_options.precision", Kind::String,
       "fp32, or bf16 (bf16 compute with fp32 master weights)"},
      {"--reduce-dtype", "strategy_options.reduce_dtype", Kind::String,
       "dtype gradients are reduced in: fp32 or bf16"},
      {"--attention", "model.attention", Kind::String,
       "each block's attention kernels: sdpa (default; flash on a GPU, keeps no s x s matrix) "
       "or unfused (scores materialised and saved, as Megatron-LM ran them in 2022)"},
      {"--selective-recompute", "model.selective_recompute", Kind::Bool,
       "run each block's attention again in backward instead of keeping what it saved "
       "(Korthikanti et al.'s selective recompute)"},
      {"--activation-checkpointing", "strategy_options.activation_checkpointing", Kind::Bool,
       "recompute each block's activations during backward instead of keeping them"},
      {"--offload", "strategy_options.offload", Kind::Bool,
       "zero1/zero2: keep optimizer state and its step on the host (ZeRO-Offload)"},
      {"--sequence-parallel", "strategy_options.sequence_parallel", Kind::Bool,
       "tp: split LayerNorm and residual regions along the sequence (all-gather / "
       "reduce-scatter instead of all-reduce)"},
      {"--tp", "strategy_options.tensor_parallel", Kind::Int,
       "tp/hybrid: tensor-parallel degree (tp default: the world size)"},
      {"--pp", "strategy_options.pipeline_parallel", Kind::Int,
       "pp/hybrid: pipeline stages (pp default: the world size)"},
      {"--dp", "strategy_options.data_parallel", Kind::Int,
       "tp/pp/hybrid: data-parallel degree (default: world / (tp * pp))"},
      {"--micro-batches", "strategy_options.micro_batches", Kind::Int,
       "pipeline micro-batches per step (default: the number of stages)"},
      {"--schedule", "strategy_options.schedule", Kind::String,
       "pipeline schedule: 1f1b, gpipe, interleaved-1f1b, zero-bubble, zbv or dualpipev"},
      {"--stages-per-rank", "strategy_options.stages_per_rank", Kind::Int,
       "pipeline stages each rank holds (default: 1; 2 for the multi-stage schedules)"},
      {"--cp", "strategy_options.context_parallel", Kind::Int,
       "cp: ranks each sequence is split over, ring attention (default: the world size; the "
       "rest data-parallel)"},
      {"--ep", "strategy_options.expert_parallel", Kind::Int,
       "ep: ranks the experts are spread over, E/ep each (default: the world size; the rest "
       "holds copies)"},
      {"--dp-sync", "strategy_options.data_parallel_sync", Kind::String,
       "tp/pp/hybrid/cp: gradient sync of the data-parallel dimension (`shardscope strategies` "
       "marks "
       "them)"},
      {"--find-unused-parameters", "strategy_options.find_unused_parameters", Kind::Bool,
       "DDP: allow parameters that get no gradient"},
      {"--contended", "contended", Kind::Bool,
       "ranks sharing a device compute at once, contending for it (the raw wall-clock picture); "
       "by default they take turns, so each rank's compute is timed as on a device of its own"},
      {"--no-tracing", "tracing", Kind::BoolOff,
       "record no trace (to measure what tracing costs); bytes per step are then unknown"},
      {"--no-device-tracing", "device_tracing", Kind::BoolOff,
       "on a GPU: record host spans but no kernels (CUPTI adds about 20 us to each kernel "
       "launch; docs/running-on-a-gpu.md)"},
  };
}

// Faults to inject, checkpoints, and the weights a run starts from.
std::vector<FlagSpec> recovery_flag_specs() {
  return {
      {"--inject-fault", "inject_fault", Kind::String,
       "make a rank fail: rank=R,step=S,kind=throw|exit|hang|stop (not throw: --mode processes)"},
      {"--checkpoint-every", "checkpoint_every", Kind::Int,
       "write a checkpoint every K steps (0: only when Ctrl-C or SIGTERM stops the run)"},
      {"--checkpoint-keep", "checkpoint_keep", Kind::Int,
       "keep the newest K checkpoints, removing older ones (0: keep every one)"},
      {"--checkpoint-dir", "checkpoint_dir", Kind::String,
       "where checkpoints go: D/step-NNNNNN/ with one shard per rank and a manifest"},
      {"--resume", "resume", Kind::String,
       "continue from the newest valid checkpoint in this directory (any world size for the "
       "data-parallel and ZeRO strategies)"},
      {"--init-weights", "init_weights", Kind::String,
       "start every rank and the reference from this name -> tensor file instead of the seed's "
       "weights: torch.save(model.state_dict(), f) or .safetensors (fp32, fp16, bf16 or fp64)"},
  };
}

}  // namespace

const std::vector<FlagSpec>& run_flag_specs() {
  static const std::vector<FlagSpec> specs = [] {
    std::vector<FlagSpec> all;
    for (auto group : {placement_flag_specs, model_flag_specs, optimizer_flag_specs,
                       strategy_flag_specs, recovery_flag_specs}) {
      for (FlagSpec& spec : group()) all.push_back(std::move(spec));
    }
    return all;
  }();
  return specs;
}

void RunFlags::add_to(CLI::App& app) {
  add_to(app, nlohmann::json::object());
}

void RunFlags::add_to(CLI::App& app, const nlohmann::json& command_defaults) {
  // Values are held as text until every flag is known (see overrides()), so CLI11 would call
  // each one TEXT: the help names the real type, and the default of a fresh Config.
  // A named Config, not a temporary: GCC 12 takes a temporary's strings for uninitialised.
  const Config fresh;
  nlohmann::json defaults = to_json(fresh);
  defaults.merge_patch(command_defaults);
  for (const auto& spec : run_flag_specs()) {
    CLI::Option* option = nullptr;
    if (spec.kind == Kind::Bool || spec.kind == Kind::BoolOff) {
      option = app.add_flag(spec.flag, bools_[spec.flag], spec.help);
    } else if (spec.kind == Kind::Int && spec.key.rfind("model.", 0) == 0) {
      option =
          app.add_option(spec.flag, values_[spec.flag], spec.help + " (default: the preset's)");
    } else {
      option = app.add_option(spec.flag, values_[spec.flag], spec.help);
      const auto pointer = nlohmann::json::json_pointer(key_pointer(spec.key));
      if (defaults.contains(pointer)) option->default_str(default_text(defaults.at(pointer)));
    }
    option->type_name(type_name(spec.kind));
    option->group("Training");
    given_[spec.flag] = option;
  }
}

std::vector<std::string> RunFlags::given_keys() const {
  std::vector<std::string> keys;
  for (const auto& spec : run_flag_specs())
    if (static_cast<const CLI::Option*>(given_.at(spec.flag))->count() > 0)
      keys.push_back(spec.key);
  return keys;
}

nlohmann::json RunFlags::overrides() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& spec : run_flag_specs()) {
    const auto* option = static_cast<const CLI::Option*>(given_.at(spec.flag));
    if (option->count() == 0) continue;
    nlohmann::json value = spec.kind == Kind::Bool      ? nlohmann::json(true)
                           : spec.kind == Kind::BoolOff ? nlohmann::json(false)
                                                        : parse_value(spec, values_.at(spec.flag));
    out[nlohmann::json::json_pointer(key_pointer(spec.key))] = value;
  }
  return out;
}

nlohmann::json RunFlags::config_overrides(const std::string& config_file) const {
  nlohmann::json merged = nlohmann::json::object();
  if (!config_file.empty()) {
    std::error_code ec;
    if (std::filesystem::is_directory(config_file, ec))
      throw ConfigError("config", "'" + config_file + "' is a directory, not a config file");
    if (const std::string why = profiling::input_file_problem(
            config_file, profiling::kMaxTextInputBytes, "config file");
        !why.empty()) {
      throw ConfigError("config",
                        why.rfind("no such file", 0) == 0
                            ? "cannot read config file '" + config_file + "': no such file"
                            : why);
    }
    std::ifstream in(config_file);
    if (!in) throw ConfigError("config", "cannot read config file '" + config_file + "'");
    merged = read_config_json(in, config_file);
    // Merging flags into anything but an object would silently replace it.
    if (!merged.is_object()) {
      throw ConfigError("config", "'" + config_file + "' must hold a JSON object, got " +
                                      std::string(merged.type_name()));
    }
  }
  merged.merge_patch(overrides());
  return merged;
}

std::string RunFlags::describe_key(const std::string& key) {
  for (const auto& spec : run_flag_specs()) {
    if (spec.key == key) return spec.flag + " (" + key + ")";
  }
  return key;
}

}  // namespace shardscope::cli
