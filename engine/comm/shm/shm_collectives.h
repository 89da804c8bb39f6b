#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ATen/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "engine/comm/shm/shm_segment.h"

namespace shardscope::shm {

// One rank's side of the collectives over a Segment. Every rank of the group calls the same
// collectives in the same order (as c10d requires of any backend); each is a series of rounds:
// write this rank's part into its slot, a barrier, read the others' parts. Tensors are host
// tensors, contiguous.
//
// Reductions combine the ranks' values in rank order, ((x0 + x1) + x2) + ..., whatever the chunk:
// results are deterministic, and bitwise equal to Gloo's where Gloo's order is the same (two
// ranks: addition commutes exactly). Gloo's ring all-reduce starts each chunk at another rank, so
// at three ranks or more the two agree within fp32 rounding, not bitwise.
class Collectives {
 public:
  // How all_reduce, all_gather and reduce_scatter reach the peers' tensors (the other collectives
  // always go through the slots).
  enum class Path {
    kSlots,      // copied into this rank's slot, read from the others': two copies
    kInPlace,    // rank threads of one process: read and written where they are, one copy
    kPeerReads,  // rank processes: read (and written) in the peer process by address (peer_reads.h)
  };

  Collectives(Segment& segment, int rank) : segment_(segment), rank_(rank) {}

  void set_timeout(std::chrono::milliseconds timeout) { timeout_ms_ = timeout.count(); }
  void set_path(Path path) { path_ = path; }
  Path path() const { return path_; }
  // Whether this rank reads (and writes) a value in every peer process by address, each peer
  // having published its address (a collective: every rank calls it).
  bool probe_peer_reads();

  void all_reduce(at::Tensor& tensor, c10d::ReduceOp op);
  void broadcast(at::Tensor& tensor, int root);
  void reduce(at::Tensor& tensor, int root, c10d::ReduceOp op);
  // outputs: one tensor per rank, each input's size.
  void all_gather(std::vector<at::Tensor>& outputs, const at::Tensor& input);
  // inputs: one tensor per rank, each output's size; rank r receives the reduction of inputs[r].
  void reduce_scatter(at::Tensor& output, const std::vector<at::Tensor>& inputs, c10d::ReduceOp op);
  void gather(std::vector<at::Tensor>& outputs, const at::Tensor& input, int root);
  void scatter(at::Tensor& output, const std::vector<at::Tensor>& inputs, int root);
  // Rows of dim 0: input_splits[d] rows go to rank d, output_splits[s] come from rank s (empty:
  // equal parts).
  void all_to_all(at::Tensor& output, const at::Tensor& input,
                  const std::vector<int64_t>& output_splits,
                  const std::vector<int64_t>& input_splits);
  void barrier(const std::string& what);
  // The first barrier of a collective that then reads or writes the peers' own tensors: after
  // it, a peer that gave up (timed out, failed) before this rank arrived may have freed them, so
  // its departure is an error here rather than a read of freed memory.
  void sync_with_peers_present(const std::string& what);

 private:
  int world() const { return segment_.layout().world; }
  size_t slot_bytes() const { return segment_.layout().slot_bytes; }
  // The buffer of the next round, after its barrier.
  int next_buffer() { return static_cast<int>(round_++ % 2); }
  void sync(const std::string& what);
  uint8_t* published(int rank, int index) const;
  void publish(int index, const at::Tensor& t);
  void all_reduce_in_place(at::Tensor& tensor, c10d::ReduceOp op);
  void all_gather_in_place(std::vector<at::Tensor>& outputs, const at::Tensor& input);
  void reduce_scatter_in_place(at::Tensor& output, const std::vector<at::Tensor>& inputs,
                               c10d::ReduceOp op);
  // The kPeerReads path (shm_peer_collectives.cpp).
  // Throws PeerFailure naming the rank if its process is gone (`what`: the collective).
  void read_from(int rank, const uint8_t* remote, uint8_t* local, int64_t bytes,
                 const char* what) const;
  void write_to(int rank, const uint8_t* local, uint8_t* remote, int64_t bytes,
                const char* what) const;
  void with_peer(int rank, const char* what, const std::function<void(pid_t pid)>& transfer) const;
  // out <- the reduction, in rank order, of every rank's piece at address(rank); `each_piece`
  // runs on each piece of `out` (and its offset in bytes) once it is final.
  void reduce_share_from_peers(
      const std::function<const uint8_t*(int rank)>& address, at::Tensor out, c10d::ReduceOp op,
      const char* what,
      const std::function<void(at::Tensor piece, int64_t offset)>& each_piece = nullptr);
  void all_reduce_by_peer_reads(at::Tensor& tensor, c10d::ReduceOp op);
  void all_gather_by_peer_reads(std::vector<at::Tensor>& outputs, const at::Tensor& input);
  void reduce_scatter_by_peer_reads(at::Tensor& output, const std::vector<at::Tensor>& inputs,
                                    c10d::ReduceOp op);
  // Calls `round` for each piece of `total` units, `per_round` at a time, with its buffer.
  void in_rounds(int64_t total, int64_t per_round,
                 const std::function<void(int64_t at, int64_t n, int buffer)>& round);

  Segment& segment_;
  int rank_;
  std::atomic<int64_t> timeout_ms_{60000};  // set by the caller, read by the worker
  uint64_t barriers_ = 0;
  uint64_t round_ = 0;
  Path path_ = Path::kSlots;
  std::vector<uint8_t> scratch_;  // kPeerReads: a peer's piece, read here to be combined
};

}  // namespace shardscope::shm
