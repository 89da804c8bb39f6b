#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace shardscope {

class Comm;

// A group of parameters laid end to end in one flat vector, padded to a multiple of the world
// size, of which rank r owns the contiguous slice [r*S, (r+1)*S). This is the layout of
// ZeRO-2's gradient partitions and of FSDP's flat parameters: collectives move whole flat
// vectors, and a parameter may straddle two ranks' slices.
class FlatShard {
 public:
  // The part of one parameter that lies in this rank's slice.
  struct Piece {
    size_t param = 0;          // index into params()
    int64_t param_offset = 0;  // first element, in the flattened parameter
    int64_t shard_offset = 0;  // where it sits in this rank's slice
    int64_t length = 0;
  };

  FlatShard(std::vector<torch::Tensor> params, int rank, int world);

  const std::vector<torch::Tensor>& params() const { return params_; }
  const std::vector<Piece>& pieces() const { return pieces_; }
  int64_t offset(size_t param) const { return offsets_[param]; }
  int64_t numel() const { return numel_; }          // without padding
  int64_t padded_numel() const { return padded_; }  // world * shard_numel()
  int64_t shard_numel() const { return padded_ / world_; }
  int64_t shard_begin() const { return rank_ * shard_numel(); }

  // Copies every parameter's gradient (zeros where it has none) into `flat` (padded_numel long,
  // any dtype), padding zeroed.
  void gather_gradients(torch::Tensor& flat) const;
  // This rank's slice of the parameters' current values.
  torch::Tensor own_values() const;
  // Copies `flat` (padded_numel long) into the parameters without touching their autograd
  // version counters.
  void scatter_values(const torch::Tensor& flat) const;

 private:
  std::vector<torch::Tensor> params_;
  std::vector<int64_t> offsets_;
  std::vector<Piece> pieces_;
  int rank_ = 0;
  int world_ = 1;
  int64_t numel_ = 0;
  int64_t padded_ = 0;
};

// Clips gradients that are sharded across ranks (each element's gradient on exactly one rank,
// in `slices`' .grad), together with `replicated` ones that every rank holds whole, to a global
// norm of at most `max_norm`; returns the norm before clipping. `uncounted` gradients are scaled
// alike but left out of the norm (another rank of the group counts an identical copy).
double clip_sharded_gradients(Comm& comm, const std::vector<torch::Tensor>& slices, double max_norm,
                              const std::vector<torch::Tensor>& replicated = {},
                              const std::vector<torch::Tensor>& uncounted = {});

// For each flag, whether it is true on at least one rank (one all-reduce of a bitmap).
std::vector<bool> true_on_any_rank(Comm& comm, const std::vector<bool>& mine);

}  // namespace shardscope
