#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <ATen/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "engine/comm/shm/shm_collectives.h"
#include "engine/comm/shm/shm_segment.h"

namespace shardscope::shm {

// all_reduce, all_gather and reduce_scatter of CUDA tensors between ranks that share one device,
// on the device: no copy to the host and back. A rank thread reads its peers' tensors by address
// (one address space); a rank process opens its peers' allocations through CUDA IPC handles that
// they publish in the segment. Each collective: this rank's stream finishes what made its
// tensors, it publishes where they are, a barrier, its share of the work reading the peers'
// memory, its stream finishes, a barrier (no rank changes its tensors while a peer reads them).
// Reductions go in rank order, as the host paths', so results equal theirs bitwise.
//
// Every rank of a group calls the same collectives on tensors of the same device and dtype; the
// barriers are the host collectives' (one count per rank).
class DeviceCollectives {
 public:
  // `peers_are_threads`: every rank of the group is a thread of this process (they read each
  // other's device memory by address; rank processes open it through CUDA IPC).
  DeviceCollectives(Segment& segment, Collectives& barriers, int rank, bool peers_are_threads)
      : segment_(segment),
        barriers_(barriers),
        rank_(rank),
        peers_are_threads_(peers_are_threads) {}

  // Whether `t` takes this path: a contiguous CUDA tensor, unless SHARDSCOPE_SHM_CUDA=host
  // (stage it through host memory, as before CUDA IPC). SHARDSCOPE_SHM_CUDA=everywhere also sends
  // the host tensors of rank threads (`peers_are_threads`) this way, where tests check its order
  // and aliasing without a GPU.
  static bool takes(const at::Tensor& t, bool peers_are_threads = false);
  bool peers_are_threads() const { return peers_are_threads_; }

  void all_reduce(at::Tensor& tensor, c10d::ReduceOp op);
  // output: world x input's elements, rank r's input at r.
  void all_gather(at::Tensor& output, const at::Tensor& input);
  // input: world x output's elements; rank r receives the reduction of every rank's part r.
  void reduce_scatter(at::Tensor& output, const at::Tensor& input, c10d::ReduceOp op);

 private:
  int world() const { return segment_.layout().world; }
  // Waits for this rank's stream, then says where `t` is (and on which device) for the peers.
  void publish(const at::Tensor& t);
  // `like`'s dtype and device, `elements` of them at byte `offset` of `rank`'s published tensor.
  at::Tensor peer_tensor(int rank, int64_t offset, int64_t elements, const at::Tensor& like);
  // The start of `rank`'s published allocation in this process, opened once per allocation.
  uint8_t* peer_base(int rank);
  void finish_stream(const at::Tensor& like) const;

  Segment& segment_;
  Collectives& barriers_;
  int rank_;
  bool peers_are_threads_;
  // A peer's allocations this process opened (an IPC handle's bytes to the opened memory): kept
  // open, since opening one costs far more than a collective on it.
  std::map<std::string, std::shared_ptr<void>> opened_;
};

}  // namespace shardscope::shm
