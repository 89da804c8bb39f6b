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
#include "engine/train/config_checks.h"
#include "engine/train/strategy_registry.h"

namespace shardscope {

using config_detail::join;
using config_detail::require;

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

namespace config_detail {

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

}  // namespace config_detail

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
  std::set<std::string> given;  // each key once: "rank=1,...,rank=0" took the last silently
  while (std::getline(parts, part, ',')) {
    auto eq = part.find('=');
    require(eq != std::string::npos, "inject_fault",
            "expected key=value pairs, got '" + part + "'");
    std::string key = part.substr(0, eq), value = part.substr(eq + 1);
    require(given.insert(key).second, "inject_fault", "'" + key + "' is given twice");
    if (key == "kind") {
      fault.kind = value;
      continue;
    }
    require(key == "rank" || key == "step", "inject_fault",
            "unknown key '" + key + "' (rank, step, kind)");
    require(!value.empty() && value.size() <= 9 &&
                value.find_first_not_of("0123456789") == std::string::npos,
            "inject_fault",
            key + " must be a non-negative integer below 10^9, got '" + value.substr(0, 40) + "'");
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

}  // namespace shardscope
