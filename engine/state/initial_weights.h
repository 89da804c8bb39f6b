#pragma once

#include <memory>
#include <string>

#include "engine/model/gpt_model.h"
#include "engine/train/config.h"

namespace shardscope {

// The weights every rank and the single-device reference start from: the seeded initialisation,
// or the name -> tensor file `Config::init_weights` names (torch.save of a state_dict, or
// safetensors).

// The file's tensors in the model's parameter order, checked against the model `config`
// describes: every parameter exactly once, with its shape, in a floating point dtype. Anything
// else is a ConfigError on "init_weights" that names the file and the tensor. Rank threads and
// the reference of one run share one read: the result is kept while anyone holds it.
std::shared_ptr<const NamedTensors> load_initial_weights(const Config& config);

// Puts `file` (already read) in the order of `params`, or throws WeightsFileError naming `path`
// and the first tensor that is missing, unexpected or of another shape.
NamedTensors match_parameters(const NamedTensors& file, const NamedTensors& params,
                              const std::string& path);

// The full model a run starts from. Every strategy builds it and only then cuts its shards from
// it, so every layout and the reference start from the same weights.
GptModel initial_model(const Config& config);

}  // namespace shardscope
