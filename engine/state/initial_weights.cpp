#include "engine/state/initial_weights.h"

#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include <sys/stat.h>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "engine/state/weights_file.h"

namespace shardscope {
namespace {

std::string shape_text(at::IntArrayRef shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

// Identifies one version of the file for one model: a file rewritten between runs (same name,
// new size or time) is read again.
std::string cache_key(const Config& config) {
  struct stat info {};
  std::string key = config.init_weights;
  if (stat(config.init_weights.c_str(), &info) == 0) {
    key += "|" + std::to_string(info.st_size) + "|" + std::to_string(info.st_mtim.tv_sec) + "." +
           std::to_string(info.st_mtim.tv_nsec) + "|" + std::to_string(info.st_ino);
  }
  nlohmann::json model = to_json(config)["model"];
  return key + "|" + model.dump() + "|" + std::to_string(config.seed);
}

}  // namespace

NamedTensors match_parameters(const NamedTensors& file, const NamedTensors& params,
                              const std::string& path) {
  std::map<std::string, const torch::Tensor*> by_name;
  for (const auto& [name, tensor] : file) {
    if (!by_name.emplace(name, &tensor).second)
      throw WeightsFileError(path + ": tensor '" + name + "' appears twice");
  }
  // Our GPT's tied embeddings (engine/model/gpt_model.cpp): the LM head is the token embedding.
  const std::string embedding = "tok_emb.weight", head = "lm_head.weight";
  std::set<std::string> expected;
  NamedTensors out;
  for (const auto& [name, param] : params) {
    expected.insert(name);
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      const bool tied_file = name == head && by_name.count(embedding) > 0;
      throw WeightsFileError(path + ": no tensor named '" + name + "' (a parameter of shape " +
                             shape_text(param.sizes()) + "); the file has " +
                             std::to_string(file.size()) + " tensors, the model " +
                             std::to_string(params.size()) + " parameters" +
                             (tied_file ? " (a model with tied embeddings wrote the file, which "
                                          "keeps its LM head as the token embedding: add "
                                          "--tie-embeddings)"
                                        : ""));
    }
    if (it->second->sizes() != param.sizes()) {
      throw WeightsFileError(path + ": tensor '" + name + "' has shape " +
                             shape_text(it->second->sizes()) + ", the model's parameter is " +
                             shape_text(param.sizes()));
    }
    // A NaN or infinity (or an F64 value beyond float32's range, read as one) would train every
    // weight to NaN: it is bad input, named, before any rank starts.
    if (!torch::isfinite(*it->second).all().item<bool>()) {
      throw WeightsFileError(path + ": tensor '" + name +
                             "' holds NaN or infinite values (as float32)");
    }
    out.emplace_back(name, *it->second);
  }
  for (const auto& [name, tensor] : file) {
    // A PyTorch state_dict of a tied model lists the head beside the embedding it is: equal to
    // it, it is the same parameter, not a stranger.
    if (name == head && expected.count(head) == 0 && expected.count(embedding) > 0) {
      const torch::Tensor& tok = *by_name.at(embedding);
      if (tensor.sizes() == tok.sizes() && torch::equal(tensor, tok)) continue;
    }
    if (expected.count(name) == 0) {
      throw WeightsFileError(path + ": tensor '" + name + "' (shape " + shape_text(tensor.sizes()) +
                             ") is not a parameter of this model (--preset and the model flags "
                             "must describe the model that wrote the file)");
    }
  }
  return out;
}

std::shared_ptr<const NamedTensors> load_initial_weights(const Config& config) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<const NamedTensors>> cache;
  const std::string key = cache_key(config);
  std::lock_guard<std::mutex> lock(mutex);  // the other ranks wait for one read
  for (auto it = cache.begin(); it != cache.end();) {
    it = it->second.expired() ? cache.erase(it) : std::next(it);
  }
  if (auto hit = cache[key].lock()) return hit;
  try {
    const NamedTensors file = read_weights_file(config.init_weights);
    torch::NoGradGuard no_grad;
    GptModel shapes(config.model, config.seed);
    auto matched = std::make_shared<const NamedTensors>(
        match_parameters(file, shapes->named_params(), config.init_weights));
    cache[key] = matched;
    return matched;
  } catch (const WeightsFileError& e) {
    throw ConfigError("init_weights", e.what());
  }
}

GptModel initial_model(const Config& config) {
  GptModel model(config.model, config.seed);
  if (config.init_weights.empty()) return model;
  const auto weights = load_initial_weights(config);
  torch::NoGradGuard no_grad;
  const NamedTensors params = model->named_params();
  TORCH_CHECK(params.size() == weights->size(), "initial weights do not fit the model");
  for (size_t i = 0; i < params.size(); ++i) {
    TORCH_CHECK(params[i].first == (*weights)[i].first, "initial weights out of order");
    params[i].second.copy_((*weights)[i].second);
  }
  return model;
}

}  // namespace shardscope
