#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <torch/types.h>

namespace torch::optim {
class Optimizer;
}

namespace shardscope {

// Part of one full (unsharded) parameter: rows/columns [begin, begin + length) along `dim`, or
// with dim -1 a range of the flattened parameter (FSDP's and ZeRO-2's flat shards). Regions are
// what makes a checkpoint independent of the layout that wrote it: any strategy at any world
// size reads the regions it holds out of the full state.
struct StateRegion {
  std::string name;
  int dim = -1;
  int64_t begin = 0;
  int64_t length = 0;
};

// The view of `full` that `region` names.
torch::Tensor region_of(const torch::Tensor& full, const StateRegion& region);
StateRegion whole_region(const std::string& name, const torch::Tensor& full);

// One rank's written share of a parameter: its values and, when the optimizer has stepped it,
// the optimizer's per-element state ("exp_avg", "exp_avg_sq" or "momentum_buffer") and step
// count. Tensors are CPU fp32 copies shaped like the region.
struct StatePiece {
  StateRegion region;
  torch::Tensor value;
  std::map<std::string, torch::Tensor> slots;
  int64_t optimizer_step = 0;
};

// The whole model's training state, assembled from every rank's pieces and checked to cover
// every element of every parameter exactly once.
class TrainingState {
 public:
  // `shapes`: every parameter of the model, name -> full shape.
  explicit TrainingState(const std::vector<std::pair<std::string, std::vector<int64_t>>>& shapes);

  // Throws if the piece overlaps one already added or lies outside its parameter.
  void add(const StatePiece& piece);
  // Throws naming the first parameter some element of which no piece covered.
  void check_complete() const;

  struct Parameter {
    torch::Tensor value;
    torch::Tensor covered;  // bool, per element
    std::map<std::string, torch::Tensor> slots;
    torch::Tensor slots_covered;  // bool, per element; undefined until a piece brings slots
    int64_t optimizer_step = -1;  // -1: no piece has optimizer state
  };
  const Parameter& parameter(const std::string& name) const;
  const std::map<std::string, Parameter>& parameters() const { return parameters_; }

 private:
  std::map<std::string, Parameter> parameters_;
};

// Where the parts of the training state live on one rank. A strategy adds one entry per region
// it holds; an entry marked `written` is this rank's to save (every region is written by exactly
// one rank: a replica by its first holder, a shard by its owner).
class StateBinding {
 public:
  struct Entry {
    StateRegion region;
    torch::Tensor value;  // the live tensor holding the region (any shape with its element count)
    bool written = false;
    // The optimizer whose state covers the region, and its parameter: either `value` itself, or
    // a tensor of which rows [key_begin, key_begin + key_rows) are the region (key_rows -1: all).
    torch::optim::Optimizer* optimizer = nullptr;
    torch::Tensor key;
    int64_t key_begin = 0;
    int64_t key_rows = -1;
    torch::Tensor mirror;  // also receives the values on load (a host master copy)
  };

  void add(Entry entry) { entries_.push_back(std::move(entry)); }
  // A whole parameter, its optimizer state under `key` when `optimizer` is given.
  void add_whole(const std::string& name, const torch::Tensor& value, bool written,
                 torch::optim::Optimizer* optimizer = nullptr, const torch::Tensor& key = {},
                 const torch::Tensor& mirror = {});
  const std::vector<Entry>& entries() const { return entries_; }

  // The pieces this rank writes, copied to the CPU.
  std::vector<StatePiece> save() const;
  // Copies every bound region's values (and mirrors) out of `state`, and replaces the bound
  // optimizers' state for their keys. Throws if a key's regions carry optimizer state in part.
  void load(const TrainingState& state) const;

 private:
  std::vector<Entry> entries_;
};

}  // namespace shardscope
