#include "profiling/projection/hardware_profile.h"

#include "profiling/io/input_file.h"

#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

namespace shardscope::profiling {
namespace {

using nlohmann::json;

// Each field is read by its type: a profile written by hand (`"intra": 5`, `"name": 5`) is told
// which key is wrong and what it should be, never a JSON library's own words.
double positive(const json& object, const char* key, const std::string& where) {
  if (!object.contains(key) || !object[key].is_number())
    throw std::runtime_error(where + ": '" + key + "' must be a number");
  const double value = object[key].get<double>();
  if (!(value > 0) || !std::isfinite(value))
    throw std::runtime_error(where + ": '" + key + "' must be positive and finite");
  // No rate, latency, size or fraction of a machine lies outside these (a link of 1e-300 GB/s
  // once priced a step in 63 digits).
  if (value < 1e-6 || value > 1e9)
    throw std::runtime_error(where + ": '" + key + "' must lie between 1e-6 and 1e9");
  return value;
}

int positive_whole(const json& object, const char* key, const std::string& where) {
  const double value = positive(object, key, where);
  if (value != std::floor(value) || value > 1e6)
    throw std::runtime_error(where + ": '" + key + "' must be a whole number (at most 1e6)");
  return static_cast<int>(value);
}

double optional_non_negative(const json& object, const char* key, const std::string& where) {
  if (!object.contains(key)) return 0.0;
  const json& value = object[key];
  if (!value.is_number() || !(value.get<double>() >= 0) || !std::isfinite(value.get<double>()))
    throw std::runtime_error(where + ": '" + key + "' must be a number, zero or more");
  return value.get<double>();
}

// An optional fraction of `whole` (0 when absent), at most 1.
double optional_fraction(const json& object, const char* key, const std::string& where,
                         const char* whole) {
  const double value = optional_non_negative(object, key, where);
  if (value > 1)
    throw std::runtime_error(where + ": '" + key + "' is a fraction" + whole + ", at most 1");
  return value;
}

std::string optional_text(const json& object, const char* key, const std::string& where,
                          const std::string& fallback = "") {
  if (!object.contains(key)) return fallback;
  if (!object[key].is_string()) throw std::runtime_error(where + ": '" + key + "' must be text");
  return object[key].get<std::string>();
}

const json& object_field(const json& object, const char* key, const std::string& where,
                         const std::string& holds) {
  if (!object.contains(key)) throw std::runtime_error(where + ": '" + key + "' is missing");
  if (!object[key].is_object())
    throw std::runtime_error(where + ": '" + key + "' must be an object (" + holds + ")");
  return object[key];
}

// A key the profile's reader does not know is a misspelling whose figure would silently go
// unused (matmul_tflop for matmul_tflops): refused, naming it and what the object takes.
void refuse_unknown_keys(const json& object, std::initializer_list<const char*> known,
                         const std::string& where) {
  for (const auto& [key, value] : object.items()) {
    if (std::find_if(known.begin(), known.end(), [&](const char* k) { return key == k; }) !=
        known.end())
      continue;
    std::string names;
    for (const char* k : known) names += (names.empty() ? "" : ", ") + std::string(k);
    const std::string shown = key.size() <= 60 ? key : key.substr(0, 60) + "...";
    throw std::runtime_error(where + ": unknown key '" + shown + "' (known: " + names + ")");
  }
}

Link parse_link(const json& j, const std::string& where) {
  refuse_unknown_keys(j, {"kind", "bandwidth_gbps", "efficiency", "hw_latency_us"}, where);
  Link link;
  link.kind = optional_text(j, "kind", where);
  link.bandwidth_gbps = positive(j, "bandwidth_gbps", where);
  link.efficiency = positive(j, "efficiency", where);
  if (link.efficiency > 1) throw std::runtime_error(where + ": 'efficiency' is at most 1");
  const json& lat = object_field(j, "hw_latency_us", where, "ll, ll128, simple");
  refuse_unknown_keys(lat, {"ll", "ll128", "simple"}, where + ".hw_latency_us");
  link.hw_latency_us[0] = positive(lat, "ll", where + ".hw_latency_us");
  link.hw_latency_us[1] = positive(lat, "ll128", where + ".hw_latency_us");
  link.hw_latency_us[2] = positive(lat, "simple", where + ".hw_latency_us");
  return link;
}

// The "gpu" object: each kernel's rates, every figure with its source.
GpuCompute parse_gpu(const json& profile, const HardwareProfile& hw, const std::string& origin) {
  const std::string where = origin + ": gpu";
  const json& j = object_field(profile, "gpu", origin,
                               "sms, matmul_tflops, memory_gbps, memory_efficiency, ...");
  refuse_unknown_keys(
      j,
      {"sms", "matmul_tflops", "memory_gbps", "memory_efficiency", "attention_forward_fraction",
       "attention_backward_fraction", "kernel_us", "fp32_tflops", "fp32_matmul_tflops",
       "fp32_attention_forward_fraction", "fp32_attention_backward_fraction", "dispatch_us",
       "gemm_floor_us", "gemm_k_overhead", "collective_hidden_beside_gemm",
       "gemm_rate_beside_collective", "collective_rate_beside_gemm", "host", "sources"},
      where);
  GpuCompute gpu;
  gpu.sms = positive_whole(j, "sms", where);
  gpu.peak_tflops = hw.peak_bf16_tflops;
  gpu.matmul_tflops = positive(j, "matmul_tflops", where);
  gpu.memory_gbps = positive(j, "memory_gbps", where);
  gpu.memory_efficiency = positive(j, "memory_efficiency", where);
  gpu.attention_forward_fraction = positive(j, "attention_forward_fraction", where);
  gpu.attention_backward_fraction = positive(j, "attention_backward_fraction", where);
  for (const double fraction :
       {gpu.memory_efficiency, gpu.attention_forward_fraction, gpu.attention_backward_fraction}) {
    if (fraction > 1)
      throw std::runtime_error(where + ": efficiencies and fractions are at most 1");
  }
  if (!(hw.peak_bf16_tflops > 0) || gpu.matmul_tflops > hw.peak_bf16_tflops)
    throw std::runtime_error(where + ": 'matmul_tflops' needs a peak_bf16_tflops at least as high");
  gpu.kernel_us = optional_non_negative(j, "kernel_us", where);
  gpu.fp32_tflops = optional_non_negative(j, "fp32_tflops", where);
  if (gpu.fp32_tflops > hw.peak_bf16_tflops)
    throw std::runtime_error(where + ": 'fp32_tflops' above the bf16 peak is not a GPU's");
  gpu.fp32_matmul_tflops = optional_non_negative(j, "fp32_matmul_tflops", where);
  gpu.fp32_attention_forward_fraction =
      optional_fraction(j, "fp32_attention_forward_fraction", where, " of fp32_tflops");
  gpu.fp32_attention_backward_fraction =
      optional_fraction(j, "fp32_attention_backward_fraction", where, " of fp32_tflops");
  if (gpu.fp32_matmul_tflops > 0 && !(gpu.fp32_tflops >= gpu.fp32_matmul_tflops))
    throw std::runtime_error(where +
                             ": 'fp32_matmul_tflops' needs an fp32_tflops at least as high");
  gpu.dispatch_us = optional_non_negative(j, "dispatch_us", where);
  gpu.gemm_floor_us = optional_non_negative(j, "gemm_floor_us", where);
  gpu.gemm_k_overhead = optional_non_negative(j, "gemm_k_overhead", where);
  if (gpu.gemm_k_overhead > 1e5)
    throw std::runtime_error(where + ": 'gemm_k_overhead' is in steps of a GEMM's k loop; " +
                             std::to_string(gpu.gemm_k_overhead) + " is no GPU's");
  gpu.collective_hidden_beside_gemm =
      optional_fraction(j, "collective_hidden_beside_gemm", where, "");
  gpu.gemm_rate_beside_collective =
      optional_fraction(j, "gemm_rate_beside_collective", where, " of its pace alone");
  gpu.collective_rate_beside_gemm =
      optional_fraction(j, "collective_rate_beside_gemm", where, " of its pace alone");
  if ((gpu.gemm_rate_beside_collective > 0) != (gpu.collective_rate_beside_gemm > 0))
    throw std::runtime_error(where +
                             ": 'gemm_rate_beside_collective' and 'collective_rate_beside_gemm' "
                             "are measured together: give both, each above 0, or neither");
  if (j.contains("host")) {
    const std::string in = where + ".host";
    const json& h = object_field(j, "host", where, "view_us, op_us, autograd_op_us, ...");
    refuse_unknown_keys(
        h,
        {"view_us", "op_us", "autograd_op_us", "matmul_us", "node_us", "adamw_tensor_us", "mm_us"},
        in);
    gpu.host.view_us = positive(h, "view_us", in);
    gpu.host.op_us = positive(h, "op_us", in);
    gpu.host.autograd_op_us = positive(h, "autograd_op_us", in);
    gpu.host.matmul_us = positive(h, "matmul_us", in);
    gpu.host.node_us = positive(h, "node_us", in);
    gpu.host.adamw_tensor_us = positive(h, "adamw_tensor_us", in);
    gpu.host.mm_us = optional_non_negative(h, "mm_us", in);
    for (const double us :
         {gpu.host.view_us, gpu.host.op_us, gpu.host.autograd_op_us, gpu.host.matmul_us,
          gpu.host.node_us, gpu.host.adamw_tensor_us, gpu.host.mm_us}) {
      if (!(us <= 1e6))
        throw std::runtime_error(in + ": a host cost is microseconds, at most 1e6 (one second)");
    }
    if (gpu.host.node_us < gpu.host.op_us || gpu.host.autograd_op_us < gpu.host.op_us)
      throw std::runtime_error(in +
                               ": a node and an autograd-recorded operator include the "
                               "operator itself: node_us and autograd_op_us >= op_us");
  }
  gpu.sources = optional_text(j, "sources", where);
  if (gpu.sources.empty())
    throw std::runtime_error(where + ": 'sources' is missing (where each figure was measured)");
  return gpu;
}

}  // namespace

const char* protocol_name(Protocol protocol) {
  switch (protocol) {
    case Protocol::kLL:
      return "LL";
    case Protocol::kLL128:
      return "LL128";
    case Protocol::kSimple:
      return "Simple";
  }
  return "?";
}

std::string hardware_profile_directory() {
  if (const char* assets = std::getenv("SHARDSCOPE_ASSETS"); assets != nullptr && *assets != '\0')
    return std::string(assets) + "/hardware";
  return SHARDSCOPE_ASSETS_DIR "/hardware";
}

std::vector<std::string> hardware_profile_names() {
  std::vector<std::string> names;
  if (DIR* dir = opendir(hardware_profile_directory().c_str())) {
    while (dirent* entry = readdir(dir)) {
      const std::string file = entry->d_name;
      if (file.size() > 5 && file.compare(file.size() - 5, 5, ".json") == 0)
        names.push_back(file.substr(0, file.size() - 5));
    }
    closedir(dir);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<HardwareProfile> profile_of_device(const std::string& device) {
  if (device.empty()) return std::nullopt;
  std::optional<HardwareProfile> found;  // one node before several: the GPU, not the network
  for (const std::string& name : hardware_profile_names()) {
    try {
      HardwareProfile hw = load_hardware_profile(name);
      for (const std::string& part : hw.device_names) {
        if (device.find(part) != std::string::npos && (!found || hw.nodes < found->nodes)) {
          found = hw;
          break;
        }
      }
    } catch (const std::exception&) {
      // A malformed profile describes no device; loading it by name says why.
    }
  }
  return found;
}

HardwareProfile parse_hardware_profile(const std::string& text, const std::string& origin) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    // Where it broke: a truncated file, or a NaN that JSON cannot spell.
    throw std::runtime_error(origin + ": not valid JSON (at byte " + std::to_string(e.byte) +
                             " of " + std::to_string(text.size()) + ")");
  } catch (const json::exception& e) {
    // A number no double holds (1e400): named with the file, as every other fault of it is.
    throw std::runtime_error(origin + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw std::runtime_error(origin + ": not a JSON object");
  refuse_unknown_keys(j,
                      {"name", "description", "device_names", "gpus_per_node", "nodes",
                       "gpu_memory_gib", "compute", "peak_bf16_tflops", "matmul_tflops",
                       "launch_us", "protocols", "base_latency_us", "intra", "inter", "gpu"},
                      origin);
  HardwareProfile hw;
  hw.name = optional_text(j, "name", origin);
  if (hw.name.empty()) throw std::runtime_error(origin + ": 'name' is missing");
  hw.description = optional_text(j, "description", origin);
  hw.gpus_per_node = positive_whole(j, "gpus_per_node", origin);
  hw.nodes = positive_whole(j, "nodes", origin);
  hw.gpu_memory_gib = positive(j, "gpu_memory_gib", origin);
  const std::string compute = optional_text(j, "compute", origin);
  if (!compute.empty() && compute != "as measured")
    throw std::runtime_error(origin + ": 'compute' is \"as measured\" or left out, got '" +
                             compute + "'");
  hw.compute_as_measured = !compute.empty();
  if (!hw.compute_as_measured || j.contains("peak_bf16_tflops"))
    hw.peak_bf16_tflops = positive(j, "peak_bf16_tflops", origin);
  if (j.contains("matmul_tflops")) hw.matmul_tflops = positive(j, "matmul_tflops", origin);
  if (j.contains("device_names")) {
    const json& names = j["device_names"];
    if (!names.is_array()) throw std::runtime_error(origin + ": 'device_names' must be a list");
    for (const json& n : names) {
      if (!n.is_string() || n.get<std::string>().empty())
        throw std::runtime_error(origin + ": 'device_names' must list non-empty text");
      hw.device_names.push_back(n.get<std::string>());
    }
  }
  hw.launch_us = optional_non_negative(j, "launch_us", origin);
  const std::string protocols = optional_text(j, "protocols", origin, "nccl");
  if (protocols != "nccl" && protocols != "simple")
    throw std::runtime_error(origin + ": 'protocols' is nccl or simple, got '" + protocols + "'");
  hw.nccl_protocols = protocols == "nccl";
  hw.base_latency_us = optional_non_negative(j, "base_latency_us", origin);
  const std::string link_fields = "kind, bandwidth_gbps, efficiency, hw_latency_us";
  hw.intra = parse_link(object_field(j, "intra", origin, link_fields), origin + ": intra");
  if (hw.nodes > 1 && !j.contains("inter"))
    throw std::runtime_error(origin + ": 'inter' is missing for " + std::to_string(hw.nodes) +
                             " nodes");
  if (j.contains("inter")) {
    hw.inter = parse_link(object_field(j, "inter", origin, link_fields), origin + ": inter");
    hw.has_inter = true;
  }
  if (j.contains("gpu")) hw.gpu = parse_gpu(j, hw, origin);
  return hw;
}

HardwareProfile load_hardware_profile(const std::string& name_or_path) {
  const bool is_path =
      name_or_path.find('/') != std::string::npos ||
      (name_or_path.size() > 5 && name_or_path.compare(name_or_path.size() - 5, 5, ".json") == 0);
  const std::string path =
      is_path ? name_or_path : hardware_profile_directory() + "/" + name_or_path + ".json";
  if (is_path) {
    if (const std::string why = input_file_problem(path, kMaxTextInputBytes, "hardware profile");
        !why.empty())
      throw std::runtime_error(why);
  }
  std::ifstream file(path);
  if (!file) {
    std::string known;
    for (const auto& name : hardware_profile_names()) known += (known.empty() ? "" : ", ") + name;
    throw std::runtime_error("no hardware profile '" + name_or_path + "' (known: " + known + ")");
  }
  std::stringstream text;
  text << file.rdbuf();
  HardwareProfile hw = parse_hardware_profile(text.str(), path);
  if (is_path) hw.file = path;
  return hw;
}

}  // namespace shardscope::profiling

namespace shardscope::profiling {

HardwareProfile fit_profile(const CalibrationPoints& c, const std::string& name,
                            const std::string& description) {
  if (c.large_world <= c.small_world || c.large_bytes <= c.small_bytes)
    throw std::invalid_argument("calibration needs two world sizes and two buffer sizes");
  HardwareProfile hw;
  hw.name = name;
  hw.description = description;
  hw.gpus_per_node = 8;
  hw.nodes = 1;
  hw.gpu_memory_gib = c.memory_gib;
  hw.peak_bf16_tflops = c.matmul_tflops;
  hw.nccl_protocols = false;
  hw.launch_us = 0;
  // t(n) = base + 2(n-1) h for a buffer too small to matter.
  const double extra_steps = 2.0 * (c.large_world - c.small_world);
  const double h =
      std::max(0.01e-6, (c.t_small_at_large_world_s - c.t_small_at_small_world_s) / extra_steps);
  const double base = std::max(0.0, c.t_small_at_small_world_s - 2.0 * (c.small_world - 1) * h);
  hw.base_latency_us = base * 1e6;
  hw.intra.kind = "shared memory (Gloo over loopback)";
  hw.intra.efficiency = 1;
  for (double& latency : hw.intra.hw_latency_us) latency = h * 1e6;
  // The large buffer: what is left after latency is the wire time of 2(n-1)/n of it.
  const double latency = base + 2.0 * (c.small_world - 1) * h;
  const double wire = 2.0 * (c.small_world - 1) / c.small_world * c.large_bytes;
  const double transfer = std::max(1e-9, c.t_large_at_small_world_s - latency);
  hw.intra.bandwidth_gbps = wire / transfer / 1e9;
  return hw;
}

std::string profile_json(const HardwareProfile& hw) {
  auto link = [](const Link& l) {
    return json{{"kind", l.kind},
                {"bandwidth_gbps", l.bandwidth_gbps},
                {"efficiency", l.efficiency},
                {"hw_latency_us",
                 {{"ll", l.hw_latency_us[0]},
                  {"ll128", l.hw_latency_us[1]},
                  {"simple", l.hw_latency_us[2]}}}};
  };
  json out = {{"name", hw.name},
              {"description", hw.description},
              {"gpus_per_node", hw.gpus_per_node},
              {"nodes", hw.nodes},
              {"gpu_memory_gib", hw.gpu_memory_gib},
              {"peak_bf16_tflops", hw.peak_bf16_tflops},
              {"launch_us", hw.launch_us},
              {"protocols", hw.nccl_protocols ? "nccl" : "simple"},
              {"base_latency_us", hw.base_latency_us},
              {"intra", link(hw.intra)}};
  if (hw.nodes > 1) out["inter"] = link(hw.inter);
  if (hw.compute_as_measured) out["compute"] = "as measured";
  if (hw.matmul_tflops > 0) out["matmul_tflops"] = hw.matmul_tflops;
  return out.dump(2) + "\n";
}

}  // namespace shardscope::profiling
