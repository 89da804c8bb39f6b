#pragma once

#include <stdexcept>
#include <string>

#include "engine/model/gpt_model.h"

namespace shardscope {

// Name -> tensor files as Python writes and reads them: PyTorch's zip (torch.save of a
// state_dict, torch.load) and safetensors (safetensors.torch.save_file / load_file).

// A file that is missing, unreadable, malformed, or holds something other than name -> floating
// point tensor. The message names the file and, where one is at fault, the tensor.
class WeightsFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads either format, told apart by content (a zip starts with "PK"), not by the name. Every
// tensor comes back as a contiguous fp32 CPU tensor, in the file's order; F64, F32, F16 and BF16
// are accepted (F64 rounds to the nearest fp32), any other dtype is refused.
NamedTensors read_weights_file(const std::string& path);

// The safetensors format on its own (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape, data_offsets}}, then the raw
// bytes. `where` names the source in error messages.
NamedTensors parse_safetensors(const std::string& bytes, const std::string& where);
// Writes fp32 tensors as F32 in the given order, the header padded with spaces to a multiple of
// 8 bytes as the Python package does (the data then starts aligned).
std::string serialise_safetensors(const NamedTensors& weights);
void write_safetensors(const std::string& path, const NamedTensors& weights);

// The format `path` asks for: safetensors for a name ending in ".safetensors", PyTorch's zip
// (export_weights, what torch.load reads) for anything else.
void write_weights_file(const std::string& path, const NamedTensors& weights);

}  // namespace shardscope
