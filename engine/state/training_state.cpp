#include "engine/state/training_state.h"

#include <stdexcept>
#include <unordered_map>

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/torch.h>

namespace shardscope {
namespace {

std::string describe(const StateRegion& r) {
  if (r.dim < 0 && r.begin == 0) return r.name;
  return r.name + (r.dim < 0 ? " elements " : " dim " + std::to_string(r.dim) + " rows ") +
         std::to_string(r.begin) + ".." + std::to_string(r.begin + r.length);
}

torch::Tensor cpu_float_copy(const torch::Tensor& t) {
  return t.detach().to(torch::kCPU, torch::kFloat, false, /*copy=*/true).contiguous().view({-1});
}

torch::Tensor key_rows(const torch::Tensor& t, const StateBinding::Entry& e) {
  return e.key_rows < 0 ? t : t.narrow(0, e.key_begin, e.key_rows);
}

// The optimizer's per-element state for `key`, by name, and its step count; empty when the
// optimizer has not stepped it yet.
std::map<std::string, torch::Tensor> read_slots(torch::optim::Optimizer& optimizer,
                                                const torch::Tensor& key, int64_t* step) {
  auto found = optimizer.state().find(key.unsafeGetTensorImpl());
  if (found == optimizer.state().end()) return {};
  if (auto* adam = dynamic_cast<torch::optim::AdamWParamState*>(found->second.get())) {
    *step = adam->step();
    return {{"exp_avg", adam->exp_avg()}, {"exp_avg_sq", adam->exp_avg_sq()}};
  }
  if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(found->second.get())) {
    *step = 0;
    if (!sgd->momentum_buffer().defined()) return {};
    return {{"momentum_buffer", sgd->momentum_buffer()}};
  }
  throw std::runtime_error("checkpoint: unsupported optimizer state");
}

void write_slots(torch::optim::Optimizer& optimizer, const torch::Tensor& key,
                 std::map<std::string, torch::Tensor> slots, int64_t step) {
  void* id = key.unsafeGetTensorImpl();
  optimizer.state().erase(id);
  if (slots.empty()) return;
  if (dynamic_cast<torch::optim::AdamW*>(&optimizer) != nullptr) {
    auto state = std::make_unique<torch::optim::AdamWParamState>();
    state->step(step);
    state->exp_avg(slots.at("exp_avg"));
    state->exp_avg_sq(slots.at("exp_avg_sq"));
    optimizer.state()[id] = std::move(state);
  } else if (dynamic_cast<torch::optim::SGD*>(&optimizer) != nullptr) {
    auto state = std::make_unique<torch::optim::SGDParamState>();
    state->momentum_buffer(slots.at("momentum_buffer"));
    optimizer.state()[id] = std::move(state);
  } else {
    throw std::runtime_error("checkpoint: unsupported optimizer");
  }
}

}  // namespace

torch::Tensor region_of(const torch::Tensor& full, const StateRegion& region) {
  const int64_t extent = region.dim < 0 ? full.numel() : full.size(region.dim);
  if (region.begin < 0 || region.length < 0 || region.begin + region.length > extent) {
    throw std::runtime_error("checkpoint: region " + describe(region) + " lies outside " +
                             region.name + " (extent " + std::to_string(extent) + ")");
  }
  if (region.dim < 0) return full.view({-1}).narrow(0, region.begin, region.length);
  return full.narrow(region.dim, region.begin, region.length);
}

StateRegion whole_region(const std::string& name, const torch::Tensor& full) {
  return StateRegion{name, -1, 0, full.numel()};
}

TrainingState::TrainingState(
    const std::vector<std::pair<std::string, std::vector<int64_t>>>& shapes) {
  for (const auto& [name, shape] : shapes) {
    Parameter p;
    p.value = torch::zeros(shape, torch::kFloat);
    p.covered = torch::zeros(shape, torch::kBool);
    parameters_.emplace(name, std::move(p));
  }
}

void TrainingState::add(const StatePiece& piece) {
  auto found = parameters_.find(piece.region.name);
  if (found == parameters_.end()) {
    throw std::runtime_error("checkpoint holds parameter '" + piece.region.name +
                             "', which this model does not have");
  }
  Parameter& p = found->second;
  auto covered = region_of(p.covered, piece.region);
  if (piece.value.numel() != covered.numel()) {
    throw std::runtime_error("checkpoint: " + describe(piece.region) + " holds " +
                             std::to_string(piece.value.numel()) + " values, expected " +
                             std::to_string(covered.numel()));
  }
  if (covered.any().item<bool>()) {
    throw std::runtime_error("checkpoint: " + describe(piece.region) +
                             " overlaps a region another shard holds");
  }
  covered.fill_(true);
  auto target = region_of(p.value, piece.region);
  target.copy_(piece.value.reshape(target.sizes()));
  if (piece.slots.empty()) return;
  if (p.optimizer_step >= 0 && p.optimizer_step != piece.optimizer_step) {
    throw std::runtime_error("checkpoint: shards of " + piece.region.name +
                             " disagree on the optimizer's step count");
  }
  p.optimizer_step = piece.optimizer_step;
  if (!p.slots_covered.defined()) p.slots_covered = torch::zeros_like(p.covered);
  region_of(p.slots_covered, piece.region).fill_(true);
  for (const auto& [slot, values] : piece.slots) {
    auto& full = p.slots[slot];
    if (!full.defined()) full = torch::zeros_like(p.value);
    auto region = region_of(full, piece.region);
    region.copy_(values.reshape(region.sizes()));
  }
}

void TrainingState::check_complete() const {
  for (const auto& [name, p] : parameters_) {
    const int64_t missing = p.covered.numel() - p.covered.sum().item<int64_t>();
    if (missing > 0) {
      throw std::runtime_error("checkpoint is incomplete: " + std::to_string(missing) + " of " +
                               std::to_string(p.covered.numel()) + " values of '" + name +
                               "' are in no shard");
    }
  }
}

const TrainingState::Parameter& TrainingState::parameter(const std::string& name) const {
  auto found = parameters_.find(name);
  if (found == parameters_.end())
    throw std::runtime_error("checkpoint has no parameter '" + name + "'");
  return found->second;
}

void StateBinding::add_whole(const std::string& name, const torch::Tensor& value, bool written,
                             torch::optim::Optimizer* optimizer, const torch::Tensor& key,
                             const torch::Tensor& mirror) {
  Entry e;
  e.region = whole_region(name, value);
  e.value = value;
  e.written = written;
  e.optimizer = optimizer;
  e.key = key.defined() ? key : value;
  e.mirror = mirror;
  add(std::move(e));
}

std::vector<StatePiece> StateBinding::save() const {
  std::vector<StatePiece> pieces;
  for (const Entry& e : entries_) {
    if (!e.written) continue;
    StatePiece piece;
    piece.region = e.region;
    piece.value = cpu_float_copy(e.value);
    if (e.optimizer != nullptr) {
      for (const auto& [slot, values] : read_slots(*e.optimizer, e.key, &piece.optimizer_step))
        piece.slots[slot] = cpu_float_copy(key_rows(values, e));
    }
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

void StateBinding::load(const TrainingState& state) const {
  torch::NoGradGuard no_grad;
  // Optimizer state is per key, and one key may hold several regions (a Megatron QKV shard is
  // three row ranges of the full tensor): collect every region of a key before replacing it.
  struct KeyState {
    torch::optim::Optimizer* optimizer = nullptr;
    torch::Tensor key;
    std::map<std::string, torch::Tensor> slots;
    int64_t step = -1;
    int with = 0, without = 0;
    std::string example;
  };
  std::unordered_map<void*, KeyState> keys;
  std::vector<void*> order;
  for (const Entry& e : entries_) {
    const auto& p = state.parameter(e.region.name);
    auto source = region_of(p.value, e.region);
    if (source.numel() != e.value.numel()) {
      throw std::runtime_error("checkpoint: " + describe(e.region) + " has " +
                               std::to_string(source.numel()) + " values, this rank holds " +
                               std::to_string(e.value.numel()));
    }
    e.value.detach().copy_(source.reshape(e.value.sizes()));
    if (e.mirror.defined()) e.mirror.detach().copy_(source.reshape(e.mirror.sizes()));
    if (e.optimizer == nullptr) continue;

    void* id = e.key.unsafeGetTensorImpl();
    auto [it, inserted] = keys.try_emplace(id);
    KeyState& k = it->second;
    if (inserted) {
      order.push_back(id);
      k.optimizer = e.optimizer;
      k.key = e.key;
      k.example = e.region.name;
    }
    const bool has =
        p.slots_covered.defined() && region_of(p.slots_covered, e.region).all().item<bool>();
    const bool none =
        !p.slots_covered.defined() || !region_of(p.slots_covered, e.region).any().item<bool>();
    if (!has && !none) {
      throw std::runtime_error("checkpoint: optimizer state covers only part of " +
                               describe(e.region));
    }
    if (!has) {
      ++k.without;
      continue;
    }
    ++k.with;
    if (k.step >= 0 && k.step != p.optimizer_step) {
      throw std::runtime_error("checkpoint: the parts of one optimizer parameter (" + k.example +
                               ", " + e.region.name + ") have different step counts");
    }
    k.step = p.optimizer_step;
    for (const auto& [slot, full] : p.slots) {
      auto& target = k.slots[slot];
      if (!target.defined()) target = torch::zeros_like(e.key, e.key.options());
      auto rows = key_rows(target, e);
      rows.copy_(region_of(full, e.region).reshape(rows.sizes()));
    }
  }
  for (void* id : order) {
    KeyState& k = keys.at(id);
    if (k.with > 0 && k.without > 0) {
      throw std::runtime_error(
          "checkpoint: optimizer state covers only part of what one "
          "optimizer parameter holds (" +
          k.example + ")");
    }
    write_slots(*k.optimizer, k.key, std::move(k.slots), k.step);
  }
}

}  // namespace shardscope
