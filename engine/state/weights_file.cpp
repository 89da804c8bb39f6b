#include "engine/state/weights_file.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>

#include <sys/stat.h>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "engine/state/atomic_file.h"
#include "engine/state/torch_zip_reader.h"
#include "engine/state/weights.h"
#include "profiling/io/input_file.h"

// Both formats store little-endian bytes, which is what a tensor holds in memory here.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "weights files assume a little-endian host");

namespace shardscope {
namespace {

using nlohmann::json;

struct SafetensorsDtype {
  const char* name;
  torch::ScalarType type;
};

// The floating point dtypes a parameter can come from; anything else is not a weight.
constexpr SafetensorsDtype kFloatDtypes[] = {{"F32", torch::kFloat},
                                             {"F16", torch::kHalf},
                                             {"BF16", torch::kBFloat16},
                                             {"F64", torch::kDouble}};
constexpr const char* kAcceptedDtypes = "F32, F16, BF16 or F64";

// What the writer can store (checkpoints of token batches are integer, for example).
const char* safetensors_dtype_name(torch::ScalarType type) {
  for (const auto& d : kFloatDtypes)
    if (d.type == type) return d.name;
  switch (type) {
    case torch::kLong:
      return "I64";
    case torch::kInt:
      return "I32";
    case torch::kShort:
      return "I16";
    case torch::kChar:
      return "I8";
    case torch::kByte:
      return "U8";
    case torch::kBool:
      return "BOOL";
    default:
      return nullptr;
  }
}

std::string quoted(const std::string& name) {
  return "'" + name + "'";
}

// The size of a weights file that can be read: a regular file within the bound.
uint64_t weights_file_size(const std::string& path) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) throw WeightsFileError(path + ": no such file");
  if (S_ISDIR(info.st_mode)) throw WeightsFileError(path + " is a directory, not a weights file");
  if (const std::string why =
          profiling::input_file_problem(path, profiling::kMaxWeightsBytes, "weights file");
      !why.empty())
    throw WeightsFileError(why);
  return static_cast<uint64_t>(info.st_size);
}

// The first `count` bytes of `path` (count no more than its size).
std::vector<char> read_file_bytes(const std::string& path, uint64_t count) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw WeightsFileError(path + ": cannot open for reading");
  std::vector<char> bytes(static_cast<size_t>(count));
  if (count > 0 && !in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())))
    throw WeightsFileError(path + ": read failed");
  return bytes;
}

std::vector<char> read_whole_file(const std::string& path) {
  return read_file_bytes(path, weights_file_size(path));
}

// A weight as training holds it: fp32, contiguous, on the CPU, owning its memory.
torch::Tensor as_parameter(const torch::Tensor& tensor, const std::string& name,
                           const std::string& where, const std::string& dtype_text) {
  bool floating = false;
  for (const auto& d : kFloatDtypes) floating = floating || d.type == tensor.scalar_type();
  if (!floating) {
    throw WeightsFileError(where + ": tensor " + quoted(name) + " has dtype " + dtype_text +
                           "; a parameter needs " + kAcceptedDtypes);
  }
  return tensor.to(torch::kCPU, torch::kFloat).contiguous().clone();
}

uint64_t read_u64_le(const char* p) {
  uint64_t v = 0;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// A safetensors file of `size` bytes (at least 8) can hold the header its length claims.
void check_header_fits(uint64_t header_size, uint64_t size, const std::string& where) {
  if (header_size > size - 8) {
    throw WeightsFileError(where + ": the safetensors header claims " +
                           std::to_string(header_size) + " bytes, the file has " +
                           std::to_string(size - 8) + " after the length (truncated or corrupt)");
  }
}

// The JSON header of a safetensors file of `size` bytes, whose first 8 + header_size bytes are at
// `data`: refused when the file cannot hold it or it is not a JSON object.
json parsed_header(const char* data, uint64_t header_size, uint64_t size,
                   const std::string& where) {
  check_header_fits(header_size, size, where);
  const json header = json::parse(data + 8, data + 8 + header_size, nullptr,
                                  /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object())
    throw WeightsFileError(where + ": the safetensors header is not a JSON object (corrupt?)");
  return header;
}

// A safetensors file's header is read and parsed before its data: a file that is not one (2 GB
// of zeros) was read whole into memory before its first 8 bytes were looked at.
void check_safetensors_header(const std::string& path, uint64_t size) {
  constexpr uint64_t kMostHeaderBytes = uint64_t{100} << 20;  // safetensors' own limit
  if (size < 8) return;                                       // parse_safetensors_bytes says why
  const uint64_t header_size = read_u64_le(read_file_bytes(path, 8).data());
  if (header_size == 0 || header_size > kMostHeaderBytes) {
    throw WeightsFileError(path + ": not a weights file (a safetensors header of " +
                           std::to_string(header_size) + " bytes; a PyTorch file is a zip)");
  }
  check_header_fits(header_size, size, path);
  const std::vector<char> head = read_file_bytes(path, 8 + header_size);
  parsed_header(head.data(), header_size, size, path);
}

// One tensor's header entry, checked against the data it points at.
struct SafetensorsEntry {
  std::string name;
  torch::ScalarType type;
  std::vector<int64_t> shape;
  uint64_t begin;
  uint64_t end;
};

SafetensorsEntry parse_entry(const std::string& name, const json& entry, uint64_t data_size,
                             const std::string& where) {
  const std::string at = where + ": tensor " + quoted(name);
  if (!entry.is_object()) throw WeightsFileError(at + ": header entry is not an object");
  const json& dtype = entry.value("dtype", json());
  const json& shape = entry.value("shape", json());
  const json& offsets = entry.value("data_offsets", json());
  if (!dtype.is_string()) throw WeightsFileError(at + ": header entry has no dtype");
  if (!shape.is_array()) throw WeightsFileError(at + ": header entry has no shape");
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    throw WeightsFileError(at + ": header entry has no data_offsets [begin, end]");
  }
  SafetensorsEntry e{
      name, torch::kFloat, {}, offsets[0].get<uint64_t>(), offsets[1].get<uint64_t>()};
  const SafetensorsDtype* found = nullptr;
  for (const auto& d : kFloatDtypes)
    if (dtype.get<std::string>() == d.name) found = &d;
  if (found == nullptr) {
    throw WeightsFileError(at + " has dtype " + dtype.get<std::string>() + "; a parameter needs " +
                           kAcceptedDtypes);
  }
  e.type = found->type;
  // Counted against the data that is there, so a corrupt shape cannot overflow the product.
  uint64_t bytes = c10::elementSize(e.type);
  for (const json& dim : shape) {
    if (!dim.is_number_unsigned())
      throw WeightsFileError(at + ": shape " + shape.dump() + " is not a list of sizes");
    const uint64_t d = dim.get<uint64_t>();
    if (d != 0 && bytes > std::numeric_limits<uint64_t>::max() / d) {
      throw WeightsFileError(at + ": shape " + shape.dump() + " is larger than any file");
    }
    bytes *= d;
    e.shape.push_back(static_cast<int64_t>(d));
  }
  if (e.begin > e.end || e.end > data_size) {
    throw WeightsFileError(at + ": data_offsets [" + std::to_string(e.begin) + ", " +
                           std::to_string(e.end) + "] lie outside the " +
                           std::to_string(data_size) + " data bytes (truncated file?)");
  }
  if (e.end - e.begin != bytes) {
    throw WeightsFileError(at + ": shape " + shape.dump() + " in " + dtype.get<std::string>() +
                           " needs " + std::to_string(bytes) + " bytes, data_offsets give " +
                           std::to_string(e.end - e.begin));
  }
  return e;
}

NamedTensors parse_safetensors_bytes(const char* data, size_t size, const std::string& where) {
  if (size < 8) {
    throw WeightsFileError(where + " is " + std::to_string(size) +
                           " bytes: too short for a weights file");
  }
  const uint64_t header_size = read_u64_le(data);
  const json header = parsed_header(data, header_size, size, where);
  const char* payload = data + 8 + header_size;
  const uint64_t payload_size = size - 8 - header_size;
  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;  // free-form text, e.g. {"format": "pt"}
    entries.push_back(parse_entry(name, entry, payload_size, where));
  }
  // As the format requires, the tensors tile the data: no gap, no overlap, nothing after.
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
  });
  uint64_t expected = 0;
  for (const auto& e : entries) {
    if (e.begin != expected) {
      throw WeightsFileError(where + ": tensor " + quoted(e.name) + " starts at data byte " +
                             std::to_string(e.begin) + ", where " + std::to_string(expected) +
                             " was expected (overlapping tensors or a gap: corrupt header)");
    }
    expected = e.end;
  }
  if (expected != payload_size) {
    throw WeightsFileError(where + ": " + std::to_string(payload_size - expected) +
                           " data bytes after the last tensor (corrupt header)");
  }
  NamedTensors out;
  for (const auto& e : entries) {
    auto t = torch::empty(e.shape, torch::TensorOptions().dtype(e.type));
    if (e.end > e.begin) std::memcpy(t.data_ptr(), payload + e.begin, e.end - e.begin);
    out.emplace_back(e.name, as_parameter(t, e.name, where, c10::toString(e.type)));
  }
  return out;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

NamedTensors parse_safetensors(const std::string& bytes, const std::string& where) {
  return parse_safetensors_bytes(bytes.data(), bytes.size(), where);
}

NamedTensors read_weights_file(const std::string& path) {
  const uint64_t size = weights_file_size(path);
  // What the file is, from its first bytes, before the rest is read.
  const std::vector<char> start = read_file_bytes(path, std::min<uint64_t>(size, 8));
  if (start.size() >= 4 && std::memcmp(start.data(), "PK\x03\x04", 4) == 0) {
    NamedTensors out;
    for (const auto& [name, tensor] : read_torch_zip(path))
      out.emplace_back(name, as_parameter(tensor, name, path, c10::toString(tensor.scalar_type())));
    return out;
  }
  // PyTorch's pre-1.6 format is a bare pickle stream (it starts with the PROTO opcode 0x80).
  if (!start.empty() && static_cast<unsigned char>(start[0]) == 0x80) {
    throw WeightsFileError(path +
                           " is in PyTorch's legacy format; save it again with torch.save "
                           "(the zip format, the default since PyTorch 1.6) or as safetensors");
  }
  check_safetensors_header(path, size);
  const std::vector<char> bytes = read_whole_file(path);
  return parse_safetensors_bytes(bytes.data(), bytes.size(), path);
}

std::string serialise_safetensors(const NamedTensors& weights) {
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}};  // what safetensors.torch.save_file writes
  std::vector<torch::Tensor> data;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : weights) {
    torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
    const char* dtype = safetensors_dtype_name(t.scalar_type());
    if (dtype == nullptr) {
      throw std::invalid_argument("safetensors cannot store tensor " + quoted(name) + " of dtype " +
                                  std::string(c10::toString(t.scalar_type())));
    }
    if (header.contains(name)) throw std::invalid_argument("two tensors named " + quoted(name));
    const uint64_t bytes = t.numel() * t.element_size();
    header[name] = {
        {"dtype", dtype}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(t);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const uint64_t header_size = text.size();
  std::memcpy(out.data(), &header_size, sizeof(header_size));
  out += text;
  out.reserve(out.size() + offset);
  for (const auto& t : data) {
    if (t.numel() > 0)
      out.append(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
  }
  return out;
}

void write_safetensors(const std::string& path, const NamedTensors& weights) {
  write_file_atomically(path, serialise_safetensors(weights));
}

void write_weights_file(const std::string& path, const NamedTensors& weights) {
  if (ends_with(path, ".safetensors")) {
    write_safetensors(path, weights);
  } else {
    export_weights(path, weights);
  }
}

}  // namespace shardscope
