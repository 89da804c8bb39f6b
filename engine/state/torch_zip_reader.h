#pragma once

#include <string>

#include "engine/model/gpt_model.h"

namespace shardscope {

// Reads what Python's torch.save writes for a name -> tensor dict: PyTorch's zip container
// (data.pkl plus one record per storage), including model.state_dict(), which is a
// collections.OrderedDict carrying a _metadata attribute. LibTorch's own unpickler turns an
// OrderedDict into None (it only expects one as a tensor's empty backward hooks), so this file
// runs the few pickle opcodes such a file uses itself; anything else (a whole pickled model, say)
// is refused. Tensors come back as saved (dtype, shape; views into shared storages resolved),
// in the dict's order. Throws WeightsFileError naming `path` (see engine/state/weights_file.h).
NamedTensors read_torch_zip(const std::string& path);

// Why the PyTorch zip at `path` cannot be trusted, or "": a container LibTorch cannot open
// (truncated, not a zip), or a record whose bytes do not match the CRC-32 its directory declares
// (LibTorch reads without checking them, so a flipped byte would load silently).
std::string torch_zip_problem(const std::string& path);

}  // namespace shardscope
