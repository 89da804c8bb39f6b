#include "engine/train/config.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/model/core_attention.h"
#include "engine/model/gpt_model.h"
#include "engine/train/config_bounds.h"
#include "engine/train/strategy_registry.h"

namespace shardscope {
namespace {

using nlohmann::json;

template <typename T>
T read_value(const json& value, const std::string& field);

template <>
int read_value<int>(const json& value, const std::string& field) {
  if (!value.is_number_integer()) throw ConfigError(field, "expected an integer");
  auto v = value.get<int64_t>();
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    throw ConfigError(field, "integer out of range");
  }
  return static_cast<int>(v);
}

template <>
uint64_t read_value<uint64_t>(const json& value, const std::string& field) {
  if (!value.is_number_integer() || (!value.is_number_unsigned() && value.get<int64_t>() < 0)) {
    throw ConfigError(field, "expected a non-negative integer");
  }
  return value.get<uint64_t>();
}

template <>
double read_value<double>(const json& value, const std::string& field) {
  if (!value.is_number()) throw ConfigError(field, "expected a number");
  return value.get<double>();
}

template <>
bool read_value<bool>(const json& value, const std::string& field) {
  if (!value.is_boolean()) throw ConfigError(field, "expected true or false");
  return value.get<bool>();
}

template <>
std::string read_value<std::string>(const json& value, const std::string& field) {
  if (!value.is_string()) throw ConfigError(field, "expected a string");
  return value.get<std::string>();
}

template <>
std::vector<std::string> read_value<std::vector<std::string>>(const json& value,
                                                              const std::string& field) {
  if (!value.is_array()) throw ConfigError(field, "expected a list of strings");
  std::vector<std::string> out;
  for (const auto& item : value) out.push_back(read_value<std::string>(item, field));
  return out;
}

// One configuration key: how to read it from JSON and how to write it back.
struct FieldBinding {
  std::function<void(Config&, const json&, const std::string&)> set;
  std::function<json(const Config&)> get;
};

template <typename T, typename Access>
FieldBinding bind(Access access) {
  return FieldBinding{[access](Config& c, const json& v, const std::string& key) {
                        access(c) = read_value<T>(v, key);
                      },
                      [access](const Config& c) { return json(access(c)); }};
}

#define SHARDSCOPE_FIELD(type, member) bind<type>([](auto& c) -> auto& { return c.member; })

const std::map<std::string, FieldBinding>& field_table() {
  static const std::map<std::string, FieldBinding> table = {
      {"preset", SHARDSCOPE_FIELD(std::string, preset)},
      {"world", SHARDSCOPE_FIELD(int, world)},
      {"mode", SHARDSCOPE_FIELD(std::string, mode)},
      {"device", SHARDSCOPE_FIELD(std::string, device)},
      {"backend", SHARDSCOPE_FIELD(std::string, backend)},
      {"strategy", SHARDSCOPE_FIELD(std::string, strategy)},
      {"steps", SHARDSCOPE_FIELD(int, steps)},
      {"micro_batch", SHARDSCOPE_FIELD(int, micro_batch)},
      {"global_batch", SHARDSCOPE_FIELD(int, global_batch)},
      {"grad_accum", SHARDSCOPE_FIELD(int, grad_accum)},
      {"seed", SHARDSCOPE_FIELD(uint64_t, seed)},
      {"data", SHARDSCOPE_FIELD(std::string, data)},
      {"threads_per_rank", SHARDSCOPE_FIELD(int, threads_per_rank)},
      {"collective_timeout_s", SHARDSCOPE_FIELD(int, collective_timeout_s)},
      {"memory_limit_mb", SHARDSCOPE_FIELD(double, memory_limit_mb)},
      {"tracing", SHARDSCOPE_FIELD(bool, tracing)},
      {"device_tracing", SHARDSCOPE_FIELD(bool, device_tracing)},
      {"contended", SHARDSCOPE_FIELD(bool, contended)},
      {"reference", SHARDSCOPE_FIELD(bool, reference)},
      {"checkpoint_every", SHARDSCOPE_FIELD(int, checkpoint_every)},
      {"checkpoint_dir", SHARDSCOPE_FIELD(std::string, checkpoint_dir)},
      {"checkpoint_keep", SHARDSCOPE_FIELD(int, checkpoint_keep)},
      {"resume", SHARDSCOPE_FIELD(std::string, resume)},
      {"init_weights", SHARDSCOPE_FIELD(std::string, init_weights)},
      {"model.vocab", SHARDSCOPE_FIELD(int, model.vocab)},
      {"model.d_model", SHARDSCOPE_FIELD(int, model.d_model)},
      {"model.heads", SHARDSCOPE_FIELD(int, model.heads)},
      {"model.layers", SHARDSCOPE_FIELD(int, model.layers)},
      {"model.seq", SHARDSCOPE_FIELD(int, model.seq)},
      {"model.mlp_ratio", SHARDSCOPE_FIELD(int, model.mlp_ratio)},
      {"model.tie_embeddings", SHARDSCOPE_FIELD(bool, model.tie_embeddings)},
      {"model.frozen", SHARDSCOPE_FIELD(std::vector<std::string>, model.frozen)},
      {"model.unused_parameter", SHARDSCOPE_FIELD(bool, model.unused_parameter)},
      {"model.experts", SHARDSCOPE_FIELD(int, model.experts)},
      {"model.top_k", SHARDSCOPE_FIELD(int, model.top_k)},
      {"model.attention", SHARDSCOPE_FIELD(std::string, model.attention)},
      {"model.selective_recompute", SHARDSCOPE_FIELD(bool, model.selective_recompute)},
      {"optimizer.name", SHARDSCOPE_FIELD(std::string, optimizer.name)},
      {"optimizer.lr", SHARDSCOPE_FIELD(double, optimizer.lr)},
      {"optimizer.weight_decay", SHARDSCOPE_FIELD(double, optimizer.weight_decay)},
      {"optimizer.beta1", SHARDSCOPE_FIELD(double, optimizer.beta1)},
      {"optimizer.beta2", SHARDSCOPE_FIELD(double, optimizer.beta2)},
      {"optimizer.eps", SHARDSCOPE_FIELD(double, optimizer.eps)},
      {"optimizer.momentum", SHARDSCOPE_FIELD(double, optimizer.momentum)},
      {"optimizer.schedule", SHARDSCOPE_FIELD(std::string, optimizer.schedule)},
      {"optimizer.warmup_steps", SHARDSCOPE_FIELD(int, optimizer.warmup_steps)},
      {"optimizer.min_lr_ratio", SHARDSCOPE_FIELD(double, optimizer.min_lr_ratio)},
      {"optimizer.clip_grad_norm", SHARDSCOPE_FIELD(double, optimizer.clip_grad_norm)},
      {"strategy_options.bucket_mb", SHARDSCOPE_FIELD(double, strategy_options.bucket_mb)},
      {"strategy_options.overlap", SHARDSCOPE_FIELD(bool, strategy_options.overlap)},
      {"strategy_options.prefetch", SHARDSCOPE_FIELD(bool, strategy_options.prefetch)},
      {"strategy_options.precision", SHARDSCOPE_FIELD(std::string, strategy_options.precision)},
      {"strategy_options.reduce_dtype",
       SHARDSCOPE_FIELD(std::string, strategy_options.reduce_dtype)},
      {"strategy_options.activation_checkpointing",
       SHARDSCOPE_FIELD(bool, strategy_options.activation_checkpointing)},
      {"strategy_options.offload", SHARDSCOPE_FIELD(bool, strategy_options.offload)},
      {"strategy_options.sequence_parallel",
       SHARDSCOPE_FIELD(bool, strategy_options.sequence_parallel)},
      {"strategy_options.tensor_parallel", SHARDSCOPE_FIELD(int, strategy_options.tensor_parallel)},
      {"strategy_options.pipeline_parallel",
       SHARDSCOPE_FIELD(int, strategy_options.pipeline_parallel)},
      {"strategy_options.data_parallel", SHARDSCOPE_FIELD(int, strategy_options.data_parallel)},
      {"strategy_options.micro_batches", SHARDSCOPE_FIELD(int, strategy_options.micro_batches)},
      {"strategy_options.schedule", SHARDSCOPE_FIELD(std::string, strategy_options.schedule)},
      {"strategy_options.stages_per_rank", SHARDSCOPE_FIELD(int, strategy_options.stages_per_rank)},
      {"strategy_options.data_parallel_sync",
       SHARDSCOPE_FIELD(std::string, strategy_options.data_parallel_sync)},
      {"strategy_options.context_parallel",
       SHARDSCOPE_FIELD(int, strategy_options.context_parallel)},
      {"strategy_options.expert_parallel", SHARDSCOPE_FIELD(int, strategy_options.expert_parallel)},
      {"strategy_options.find_unused_parameters",
       SHARDSCOPE_FIELD(bool, strategy_options.find_unused_parameters)},
      {"inject_fault", FieldBinding{[](Config& c, const json& v, const std::string& key) {
                                      auto text = read_value<std::string>(v, key);
                                      c.fault = text.empty() ? FaultInjection{} : parse_fault(text);
                                    },
                                    [](const Config& c) {
                                      if (!c.fault.enabled()) return json("");
                                      return json("rank=" + std::to_string(c.fault.rank) +
                                                  ",step=" + std::to_string(c.fault.step) +
                                                  ",kind=" + c.fault.kind);
                                    }}},
  };
  return table;
}
#undef SHARDSCOPE_FIELD

}  // namespace

std::string printable(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\n' && c != '\t') || byte == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

// A key as a message shows it: a hostile config's key can be a megabyte long.
std::string shown_key(const std::string& key) {
  return key.size() <= 80
             ? key
             : key.substr(0, 60) + "... (" + std::to_string(key.size()) + " characters)";
}

// No key of ours is nested deeper than this (model.x, strategy_options.x); a config nested 30,000
// deep once overflowed the stack here.
constexpr int kMaxConfigDepth = 8;

// Nested objects become dotted keys so that files and flags share one table.
void flatten(const json& object, const std::string& prefix, std::map<std::string, json>& out,
             int depth = 1) {
  if (depth > kMaxConfigDepth) {
    throw ConfigError(shown_key(prefix), "nested deeper than " + std::to_string(kMaxConfigDepth) +
                                             " levels; no key of a config is");
  }
  for (const auto& [key, value] : object.items()) {
    std::string path = prefix.empty() ? key : prefix + "." + key;
    if (value.is_object()) {
      flatten(value, path, out, depth + 1);
    } else {
      out[path] = value;
    }
  }
}

bool is_cuda_device(const std::string& device) {
  if (device.rfind("cuda", 0) != 0) return false;
  if (device == "cuda") return true;
  if (device.size() < 6 || device[4] != ':') return false;
  return device.find_first_not_of("0123456789", 5) == std::string::npos;
}

void require(bool ok, const std::string& field, const std::string& message) {
  if (!ok) throw ConfigError(field, message);
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

struct Preset {
  const char* name;
  int vocab, d_model, heads, layers, seq;
  bool tie_embeddings;
};

// The first three run here; the rest are for projections (`shardscope project`), not for
// running: gpt-7b (about 6.9 B parameters), LLaMA-7B's width, depth, heads, context and vocabulary
// with our GELU MLP, and the four models of Korthikanti et al. 2022, Table 5.
constexpr Preset kPresets[] = {
    {"tiny", 256, 64, 4, 2, 32, false},
    {"small", 256, 384, 6, 6, 128, false},
    {"gpt2-small", 50257, 768, 12, 12, 1024, true},
    {"gpt-7b", 50257, 4096, 32, 32, 2048, false},
    {"llama-7b-like", 32000, 4096, 32, 32, 4096, false},
    {"megatron-22b", 51200, 6144, 64, 48, 2048, false},
    {"gpt3-175b", 51200, 12288, 96, 96, 2048, false},
    {"turing-530b", 51200, 20480, 128, 105, 2048, false},
    {"megatron-1t", 51200, 25600, 160, 128, 2048, false},
};

}  // namespace

ModelConfig preset_model(const std::string& name) {
  for (const Preset& p : kPresets) {
    if (name != p.name) continue;
    ModelConfig m;
    m.vocab = p.vocab, m.d_model = p.d_model, m.heads = p.heads, m.layers = p.layers;
    m.seq = p.seq, m.tie_embeddings = p.tie_embeddings;
    return m;
  }
  throw ConfigError("preset",
                    "unknown preset '" + name + "' (known: " + join(preset_names()) + ")");
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.push_back(p.name);
  return names;
}

void apply_json(Config& config, const json& overrides) {
  if (!overrides.is_object())
    throw ConfigError("config", "expected a JSON object at the top level");
  std::map<std::string, json> flat;
  flatten(overrides, "", flat);
  // Before turns were the default, a config said "serialize_compute" for taking them.
  if (auto legacy = flat.find("serialize_compute"); legacy != flat.end()) {
    if (flat.count("contended") == 0)
      flat["contended"] = !read_value<bool>(legacy->second, "serialize_compute");
    flat.erase(legacy);
  }
  const auto& table = field_table();
  for (const auto& [key, value] : flat) {
    if (table.find(key) != table.end()) continue;
    // A section ("model", "optimizer", ...) given something other than an object.
    const auto inside = table.lower_bound(key + ".");
    if (inside != table.end() && inside->first.rfind(key + ".", 0) == 0)
      throw ConfigError(key, std::string("expected an object, got ") + value.type_name());
    throw ConfigError(shown_key(key), "unknown key");
  }
  if (auto it = flat.find("preset"); it != flat.end()) {
    table.at("preset").set(config, it->second, "preset");
    config.model = preset_model(config.preset);
  }
  for (const auto& [key, value] : flat) {
    if (key != "preset") table.at(key).set(config, value, key);
  }
}

Config config_from_json(const json& overrides) {
  Config config;
  config.model = preset_model(config.preset);
  apply_json(config, overrides);
  return config;
}

json to_json(const Config& config) {
  json out = json::object();
  for (const auto& [key, binding] : field_table()) {
    std::string pointer = "/" + key;
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    out[json::json_pointer(pointer)] = binding.get(config);
  }
  return out;
}

std::string resolve_backend(Config& c, int gpus) {
  const std::string gpu_count = std::to_string(gpus) + (gpus == 1 ? " GPU" : " GPUs");
  if (c.backend == "nccl") {
    require(gpus >= c.world, "backend",
            "nccl needs one GPU per rank: " + std::to_string(c.world) + " ranks, " + gpu_count +
                " (use gloo to share a GPU)");
    c.device = "cuda";
    return "nccl, one GPU per rank";
  }
  if (c.backend != "auto") return c.backend;
  if (c.device == "cpu") {
    c.backend = "shm";
    return "auto: shm (shared memory) on the cpu";
  }
  if (gpus >= c.world && gpus > 0) {
    c.backend = "nccl";
    c.device = "cuda";
    return "auto: nccl, one GPU per rank (" + gpu_count + ")";
  }
  c.backend = "shm";
  c.device = "cuda:0";
  return "auto: shm on a shared cuda:0, reducing on the device (" + gpu_count + " for " +
         std::to_string(c.world) + " ranks)";
}

FaultInjection parse_fault(const std::string& text) {
  FaultInjection fault;
  std::stringstream parts(text);
  std::string part;
  bool have_rank = false;
  while (std::getline(parts, part, ',')) {
    auto eq = part.find('=');
    require(eq != std::string::npos, "inject_fault",
            "expected key=value pairs, got '" + part + "'");
    std::string key = part.substr(0, eq), value = part.substr(eq + 1);
    if (key == "kind") {
      fault.kind = value;
      continue;
    }
    require(key == "rank" || key == "step", "inject_fault",
            "unknown key '" + key + "' (rank, step, kind)");
    require(!value.empty() && value.find_first_not_of("0123456789") == std::string::npos,
            "inject_fault", key + " must be a non-negative integer, got '" + value + "'");
    int number = std::stoi(value);
    if (key == "rank") {
      fault.rank = number;
      have_rank = true;
    } else {
      fault.step = number;
    }
  }
  require(have_rank, "inject_fault", "rank=R is required");
  require(
      fault.kind == "throw" || fault.kind == "exit" || fault.kind == "hang" || fault.kind == "stop",
      "inject_fault", "kind must be throw, exit, hang or stop, got '" + fault.kind + "'");
  return fault;
}

namespace {

// How many ranks, how they run, and on what device.
void validate_placement(const Config& c) {
  require(c.world >= 1, "world", "must be at least 1, got " + std::to_string(c.world));
  require(c.world <= 64, "world", "at most 64 ranks on one node, got " + std::to_string(c.world));
  // auto is resolved by finalize(); a config only validated keeps it.
  require(c.mode == "auto" || c.mode == "threads" || c.mode == "processes", "mode",
          "unknown mode '" + c.mode + "' (auto, threads, processes)");
  require(c.device == "cpu" || is_cuda_device(c.device), "device",
          "expected cpu or cuda:N, got '" + c.device + "'");
  require(c.backend == "shm" || c.backend == "gloo" || c.backend == "nccl" || c.backend == "auto",
          "backend", "unknown backend '" + c.backend + "' (shm, gloo, nccl, auto)");
  require(c.backend != "nccl" || c.device != "cpu", "backend",
          "nccl runs on GPUs only (--device cuda); use gloo on the cpu");
}

// The model, and the vocabulary its data needs.
void validate_model(const Config& c) {
  const ModelConfig& m = c.model;
  require(m.vocab >= 2, "model.vocab", "must be at least 2");
  require(m.d_model >= 1, "model.d_model", "must be positive");
  require(m.heads >= 1, "model.heads", "must be positive");
  require(m.d_model % m.heads == 0, "model.heads",
          std::to_string(m.heads) + " heads do not divide d_model " + std::to_string(m.d_model));
  require(m.layers >= 1, "model.layers", "must be positive");
  require(m.seq >= 1, "model.seq", "must be positive");
  require(m.mlp_ratio >= 1, "model.mlp_ratio", "must be positive");
  require(m.experts >= 0, "model.experts", "must not be negative (0: the dense MLP)");
  require(m.experts != 1, "model.experts", "a mixture needs at least 2 experts (0: the dense MLP)");
  require(m.experts <= 1024, "model.experts", "at most 1024, got " + std::to_string(m.experts));
  require(m.experts == 0 || (m.top_k >= 1 && m.top_k <= m.experts), "model.top_k",
          "must be between 1 and the " + std::to_string(m.experts) + " experts");
  require(m.layers <= 1024, "model.layers", "at most 1024, got " + std::to_string(m.layers));
  require(is_attention_kernel(m.attention), "model.attention",
          "unknown kernel '" + m.attention + "' (sdpa or unfused)");
  require(!attention_settings(m).unfused || c.strategy_options.context_parallel <= 1,
          "model.attention",
          "context parallelism runs its own ring attention; unfused needs context_parallel 1");
  require(!m.selective_recompute || !c.strategy_options.activation_checkpointing,
          "model.selective_recompute",
          "activation checkpointing already recomputes every whole block: choose one");
  if (!m.frozen.empty()) {
    const std::vector<std::string> names = parameter_names(m);
    for (const auto& name : m.frozen) {
      require(std::find(names.begin(), names.end(), name) != names.end(), "model.frozen",
              "no parameter named '" + name + "' (names look like " + names.front() + ", " +
                  names[std::min<size_t>(2, names.size() - 1)] + ")");
    }
    // Nothing left to train is bad input, said before anything starts (it once failed at run
    // time, exit 1, in the optimizer).
    const std::set<std::string> frozen(m.frozen.begin(), m.frozen.end());
    require(frozen.size() < names.size(), "model.frozen",
            "freezes every one of the model's " + std::to_string(names.size()) +
                " parameters: nothing would train");
  }
  require(c.data == "synthetic" || m.vocab >= 256, "model.vocab",
          "byte-level text needs a vocabulary of at least 256, got " + std::to_string(m.vocab));
}

// Steps and batches, threads, timeouts, memory and checkpoints.
void validate_training(const Config& c) {
  require(c.steps >= 1, "steps", "must be at least 1");
  require(c.micro_batch >= 1, "micro_batch", "must be at least 1");
  require(c.grad_accum >= 1, "grad_accum", "must be at least 1");
  require(c.global_batch >= 0, "global_batch", "must not be negative");
  require(c.global_batch == 0 || c.global_batch % (c.world * c.grad_accum) == 0, "global_batch",
          std::to_string(c.global_batch) + " sequences do not divide evenly over world " +
              std::to_string(c.world) + " x grad_accum " + std::to_string(c.grad_accum));
  require(c.threads_per_rank >= 0, "threads_per_rank", "must not be negative");
  require(c.collective_timeout_s >= 0, "collective_timeout_s",
          "must not be negative (0: adaptive, from the step times)");
  require(std::isfinite(c.memory_limit_mb) && c.memory_limit_mb >= 0, "memory_limit_mb",
          "must be 0 (no limit) or a positive number of MB");
  require(c.memory_limit_mb == 0 || c.device == "cpu", "memory_limit_mb",
          "simulates a device's capacity on the CPU; on a GPU the device's own limit applies");
  require(c.checkpoint_every >= 0, "checkpoint_every",
          "must not be negative (0: only when a signal stops the run)");
  require(c.checkpoint_keep >= 0, "checkpoint_keep", "must not be negative (0: keep every one)");
  require(c.checkpoint_every == 0 || !c.checkpoint_dir.empty(), "checkpoint_every",
          "needs a directory to write to (--checkpoint-dir)");
}

void validate_optimizer(const OptimizerConfig& o) {
  require(o.name == "adamw" || o.name == "sgd", "optimizer.name",
          "unknown optimizer '" + o.name + "' (adamw, sgd)");
  require(o.lr > 0 && std::isfinite(o.lr), "optimizer.lr", "must be positive and finite");
  require(o.weight_decay >= 0 && std::isfinite(o.weight_decay), "optimizer.weight_decay",
          "must not be negative");
  require(o.beta1 >= 0 && o.beta1 < 1, "optimizer.beta1", "must be in [0, 1)");
  require(o.beta2 >= 0 && o.beta2 < 1, "optimizer.beta2", "must be in [0, 1)");
  require(o.eps > 0 && std::isfinite(o.eps), "optimizer.eps", "must be positive and finite");
  require(o.momentum >= 0 && std::isfinite(o.momentum), "optimizer.momentum",
          "must not be negative");
  require(o.schedule == "constant" || o.schedule == "cosine" || o.schedule == "linear",
          "optimizer.schedule", "unknown schedule '" + o.schedule + "' (constant, cosine, linear)");
  require(o.warmup_steps >= 0, "optimizer.warmup_steps", "must not be negative");
  require(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1, "optimizer.min_lr_ratio",
          "must be in [0, 1]");
  require(o.clip_grad_norm >= 0 && std::isfinite(o.clip_grad_norm), "optimizer.clip_grad_norm",
          "must not be negative (0 = off)");
}

// What every strategy's options must be; the data-parallel sync is checked against the
// registry (validate_strategy).
void validate_strategy_options(const StrategyOptions& so) {
  require(so.bucket_mb >= 0 && std::isfinite(so.bucket_mb), "strategy_options.bucket_mb",
          "must not be negative (0 = DDP's default)");
  require(so.precision == "fp32" || so.precision == "bf16", "strategy_options.precision",
          "unknown precision '" + so.precision + "' (fp32, bf16)");
  require(so.reduce_dtype == "fp32" || so.reduce_dtype == "bf16", "strategy_options.reduce_dtype",
          "unknown reduce dtype '" + so.reduce_dtype + "' (fp32, bf16)");
  require(so.tensor_parallel >= 0, "strategy_options.tensor_parallel", "must not be negative");
  require(so.pipeline_parallel >= 0, "strategy_options.pipeline_parallel", "must not be negative");
  require(so.data_parallel >= 0, "strategy_options.data_parallel", "must not be negative");
  require(so.micro_batches >= 0, "strategy_options.micro_batches", "must not be negative");
  require(so.context_parallel >= 0, "strategy_options.context_parallel", "must not be negative");
  require(so.expert_parallel >= 0, "strategy_options.expert_parallel", "must not be negative");
  // Which schedules exist, and what each needs, is the pipeline strategies' to check.
  require(so.stages_per_rank >= 0, "strategy_options.stages_per_rank", "must not be negative");
}

void validate_fault(const Config& c) {
  if (c.fault.enabled()) {
    require(c.fault.rank < c.world, "inject_fault",
            "rank " + std::to_string(c.fault.rank) + " does not exist at world " +
                std::to_string(c.world));
    require(c.fault.kind == "throw" || c.mode == "processes", "inject_fault",
            "kind=" + c.fault.kind +
                " stops a whole process: it needs --mode processes (threads share one)");
    require(c.fault.step < c.steps, "inject_fault",
            "step " + std::to_string(c.fault.step) + " is past the last step");
  }
}

// The strategy and its data-parallel sync, as registered, then what the strategy itself checks.
void validate_strategy(const Config& c) {
  const StrategyOptions& so = c.strategy_options;
  const auto& registry = StrategyRegistry::instance();
  const StrategyInfo* strategy = registry.find(c.strategy);
  require(strategy != nullptr, "strategy",
          "unknown strategy '" + c.strategy + "' (known: " + join(registry.names()) + ")");
  const auto syncs =
      registry.names_where([](const StrategyTraits& t) { return t.data_parallel_sync; });
  require(std::find(syncs.begin(), syncs.end(), so.data_parallel_sync) != syncs.end(),
          "strategy_options.data_parallel_sync",
          "unknown data-parallel sync '" + so.data_parallel_sync + "' (" + join(syncs) + ")");
  if (strategy->validate) strategy->validate(c);
}

}  // namespace

void validate(const Config& c) {
  validate_placement(c);
  validate_model(c);
  validate_training(c);
  validate_optimizer(c.optimizer);
  validate_strategy_options(c.strategy_options);
  validate_fault(c);
  check_config_bounds(c);
  validate_strategy(c);
}

void validate_structure(const Config& c) {
  validate_model(c);
  validate_optimizer(c.optimizer);
  validate_strategy_options(c.strategy_options);
  validate_strategy(c);
}

void finalize(Config& config) {
  if (config.mode == "auto")
    config.mode = is_cuda_device(config.device) && config.world > 1 ? "processes" : "threads";
  validate(config);
  if (config.global_batch > 0) {
    config.micro_batch = config.global_batch / (config.world * config.grad_accum);
    if (config.micro_batch < 1) {
      throw ConfigError("global_batch", "fewer sequences than world x grad_accum");
    }
    check_config_bounds(config);  // again, for the micro-batch the global batch gave
  }
}

}  // namespace shardscope
