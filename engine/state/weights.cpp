#include "engine/state/weights.h"

#include "engine/state/atomic_file.h"
#include "engine/state/hashing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include <ATen/core/Dict.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/csrc/jit/serialization/pickler.h>

namespace shardscope {
namespace {

// torch::pickle_save tags typed containers with a TorchScript-only global, which Python's
// torch.load (weights_only, the default since 2.6) refuses. Pickling without those tags gives
// plain dict/str/tensor records in the same zip container, which it accepts.
std::vector<char> pickle_for_torch_load(const c10::IValue& value) {
  std::vector<char> pickle;
  torch::jit::Pickler pickler(
      [&](const char* data, size_t n) { pickle.insert(pickle.end(), data, data + n); },
      /*tensor_table=*/nullptr, /*type_renamer=*/nullptr,
      /*memoized_class_types=*/nullptr, /*get_tensor_id=*/nullptr,
      /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  std::vector<char> container;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t n) {
    const char* bytes = static_cast<const char*>(data);
    container.insert(container.end(), bytes, bytes + n);
    return n;
  });
  torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(),
                                     writer);
  writer.writeEndOfFile();
  return container;
}

}  // namespace

NamedTensors to_cpu_copy(const NamedTensors& weights) {
  NamedTensors out;
  for (const auto& [name, tensor] : weights) {
    out.emplace_back(name, tensor.detach().to(torch::kCPU, torch::kFloat).contiguous().clone());
  }
  return out;
}

std::string weights_checksum(const NamedTensors& weights) {
  uint64_t h = kFnv1aOffset;
  for (const auto& [name, tensor] : weights) {
    auto t = tensor.detach().cpu().contiguous();
    h = fnv1a(name.data(), name.size(), h);
    h = fnv1a(t.data_ptr(), t.numel() * t.element_size(), h);
  }
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(h));
  return text;
}

double weights_sum(const NamedTensors& weights) {
  double sum = 0.0;
  for (const auto& [name, tensor] : weights)
    sum += tensor.detach().to(torch::kDouble).sum().item<double>();
  return sum;
}

std::string weight_group(const std::string& name) {
  const std::string blocks = "blocks.";
  if (name.compare(0, blocks.size(), blocks) == 0) {
    const size_t dot = name.find('.', blocks.size());
    return "block " + name.substr(blocks.size(), dot - blocks.size());
  }
  if (name.find("emb") != std::string::npos) return "embeddings";
  return "head";
}

std::vector<GroupDeviation> group_deviations(const NamedTensors& actual,
                                             const NamedTensors& expected) {
  std::map<std::string, torch::Tensor> by_name(expected.begin(), expected.end());
  if (actual.size() != expected.size()) {
    throw std::runtime_error("weight sets differ in size: " + std::to_string(actual.size()) +
                             " vs " + std::to_string(expected.size()));
  }
  std::vector<GroupDeviation> groups;
  for (const auto& [name, tensor] : actual) {
    auto it = by_name.find(name);
    if (it == by_name.end()) throw std::runtime_error("no reference weight named " + name);
    if (it->second.sizes() != tensor.sizes())
      throw std::runtime_error("shape mismatch for " + name);
    const std::string group = weight_group(name);
    if (groups.empty() || groups.back().group != group) groups.push_back({group, 0.0});
    if (tensor.numel() == 0) continue;
    const double d = (tensor.detach().to(torch::kCPU, torch::kDouble) -
                      it->second.detach().to(torch::kCPU, torch::kDouble))
                         .abs()
                         .max()
                         .item<double>();
    groups.back().max_abs = std::max(groups.back().max_abs, d);
  }
  return groups;
}

WeightDeviation compare_weights(const NamedTensors& actual, const NamedTensors& expected) {
  std::map<std::string, torch::Tensor> by_name(expected.begin(), expected.end());
  if (actual.size() != expected.size()) {
    throw std::runtime_error("weight sets differ in size: " + std::to_string(actual.size()) +
                             " vs " + std::to_string(expected.size()));
  }
  WeightDeviation dev;
  double diff_sq = 0.0, ref_sq = 0.0;
  for (const auto& [name, tensor] : actual) {
    auto it = by_name.find(name);
    if (it == by_name.end()) throw std::runtime_error("no reference weight named " + name);
    if (it->second.sizes() != tensor.sizes())
      throw std::runtime_error("shape mismatch for " + name);
    auto a = tensor.detach().to(torch::kCPU, torch::kDouble);
    auto b = it->second.detach().to(torch::kCPU, torch::kDouble);
    if (a.numel() == 0) continue;
    auto diff = a - b;
    const double d2 = diff.pow(2).sum().item<double>(), r2 = b.pow(2).sum().item<double>();
    diff_sq += d2;
    ref_sq += r2;
    dev.max_abs = std::max(dev.max_abs, diff.abs().max().item<double>());
    const double rel = d2 == 0.0 ? 0.0 : std::sqrt(d2 / std::max(r2, 1e-300));
    if (dev.worst.empty() || rel > dev.worst_rel) {
      dev.worst_rel = rel;
      dev.worst = name;
    }
  }
  dev.rel = diff_sq == 0.0 ? 0.0 : std::sqrt(diff_sq / std::max(ref_sq, 1e-300));
  return dev;
}

namespace {

// A zip ends with its directory, within its last 64 KiB and 22 bytes; without one, PyTorch's
// reader answers in miniz's words and a stack dump. A file cut short (a rank that died writing
// it, a copy that stopped) is told by its tail alone.
size_t zip_tail(size_t size) {
  return std::min<size_t>(size, 65536 + 22);
}

bool ends_with_zip_directory(const char* tail, size_t size) {
  static const std::string kEndOfDirectory = "PK\x05\x06";
  return std::search(tail, tail + size, kEndOfDirectory.begin(), kEndOfDirectory.end()) !=
         tail + size;
}

std::string truncated_archive(const std::string& path, size_t size) {
  return path + ": truncated, or not a PyTorch archive (" + std::to_string(size) +
         " bytes with no zip directory at the end)";
}

}  // namespace

std::string weights_file_problem(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);  // fails for folders and the like
  std::ifstream file(path, std::ios::binary);
  if (ec || !std::filesystem::is_regular_file(path, ec) || !file) return "cannot read " + path;
  std::string tail(zip_tail(size), '\0');
  file.seekg(static_cast<std::streamoff>(size - tail.size()));
  file.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  return ends_with_zip_directory(tail.data(), tail.size()) ? "" : truncated_archive(path, size);
}

void export_weights(const std::string& path, const NamedTensors& weights) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, tensor] : weights) dict.insert(name, tensor.detach().cpu().contiguous());
  std::vector<char> bytes = pickle_for_torch_load(c10::IValue(dict));
  write_file_atomically(path, bytes.data(), bytes.size());
}

NamedTensors read_exported_weights(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error("cannot read " + path);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(file)),
                                std::istreambuf_iterator<char>());
  if (!ends_with_zip_directory(bytes.data() + bytes.size() - zip_tail(bytes.size()),
                               zip_tail(bytes.size())))
    throw std::runtime_error(truncated_archive(path, bytes.size()));
  c10::IValue value;
  try {
    value = torch::jit::pickle_load(bytes);
  } catch (const c10::Error& e) {
    const std::string what = e.msg();
    throw std::runtime_error(path + " is not a PyTorch archive of weights: " +
                             what.substr(0, what.find_first_of(".\n")));
  } catch (const std::exception& e) {
    throw std::runtime_error(path + " is not a PyTorch archive of weights: " + e.what());
  }
  if (!value.isGenericDict())
    throw std::runtime_error(path + " holds a " + value.tagKind() + ", not a dict name -> tensor");
  NamedTensors weights;
  for (const auto& entry : value.toGenericDict()) {  // c10::Dict keeps the order of insertion
    if (!entry.key().isString() || !entry.value().isTensor())
      throw std::runtime_error(path + ": an entry is not name -> tensor");
    weights.emplace_back(entry.key().toStringRef(), entry.value().toTensor());
  }
  return weights;
}

}  // namespace shardscope
