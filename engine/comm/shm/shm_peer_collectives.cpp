// The kPeerReads path of Collectives: rank processes read (and, for all_reduce, write) each
// other's tensors by address (peer_reads.h), one copy as rank threads' in-place path, instead of
// two through the slots. Every collective: publish, a barrier, this rank's share of the work, a
// barrier (no rank returns, and so changes its tensors, while a peer still reads or writes them).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <ATen/ATen.h>

#include "engine/comm/shm/peer_reads.h"
#include "engine/comm/shm/reduce_ops.h"
#include "engine/comm/shm/shm_collectives.h"

namespace shardscope::shm {

namespace {

// A piece of a peer's tensor is read into scratch this many bytes at a time, to be combined while
// it is still in the cache.
constexpr int64_t kPieceBytes = 256 << 10;

}  // namespace

void Collectives::read_from(int rank, const uint8_t* remote, uint8_t* local, int64_t bytes,
                            const char* what) const {
  if (bytes <= 0) return;
  if (rank == rank_) {
    // An output that is this rank's input already holds it (FSDP gathers in place).
    if (local != remote) std::memmove(local, remote, static_cast<size_t>(bytes));
    return;
  }
  with_peer(rank, what,
            [&](pid_t pid) { read_peer(pid, remote, local, static_cast<size_t>(bytes)); });
}

void Collectives::write_to(int rank, const uint8_t* local, uint8_t* remote, int64_t bytes,
                           const char* what) const {
  if (bytes <= 0 || rank == rank_) return;
  with_peer(rank, what,
            [&](pid_t pid) { write_peer(pid, local, remote, static_cast<size_t>(bytes)); });
}

void Collectives::with_peer(int rank, const char* what,
                            const std::function<void(pid_t pid)>& transfer) const {
  const int pid = segment_.rank_area(rank).pid.load(std::memory_order_acquire);
  try {
    transfer(pid);
  } catch (const PeerReadError& e) {
    // A peer that died mid-collective (a zombie until reaped) is named as the barriers name it,
    // not by its pid alone.
    if (e.error == ESRCH) {
      throw PeerFailure("rank " + std::to_string(rank) + " (pid " + std::to_string(pid) +
                        ") exited during " + what);
    }
    throw std::runtime_error("shm: rank " + std::to_string(rank) + "'s tensor in " + what + ": " +
                             e.what());
  }
}

bool Collectives::probe_peer_reads() {
  uint64_t mine = 0x53484d50524f4245ull ^ static_cast<uint64_t>(rank_);
  segment_.rank_area(rank_).published[0].store(reinterpret_cast<uint64_t>(&mine),
                                               std::memory_order_release);
  sync("probing peer reads");
  bool ok = true;
  for (int r = 0; r < world() && ok; ++r) {
    const uint64_t theirs = 0x53484d50524f4245ull ^ static_cast<uint64_t>(r);
    ok = r == rank_ || can_read_and_write_peer(segment_.rank_area(r).pid.load(), published(r, 0),
                                               &theirs, sizeof(theirs));
  }
  segment_.rank_area(rank_).reads_peers.store(ok ? 1 : 0, std::memory_order_release);
  sync("probing peer reads");  // `mine` stays alive until every peer has read it
  bool all = true;
  for (int r = 0; r < world(); ++r)
    all = all && segment_.rank_area(r).reads_peers.load(std::memory_order_acquire) == 1;
  return all;
}

// out <- the reduction, in rank order, of every rank's piece at address(rank) (this rank's in its
// own memory). `out` may be this rank's own piece: then rank 0, and rank 1 when the op commutes
// exactly, start from it in place; other ranks gather in scratch first.
void Collectives::reduce_share_from_peers(
    const std::function<const uint8_t*(int rank)>& address, at::Tensor out, c10d::ReduceOp op,
    const char* what, const std::function<void(at::Tensor piece, int64_t offset)>& each_piece) {
  const int64_t element = out.element_size();
  const int64_t per_piece = std::max<int64_t>(1, kPieceBytes / element);
  const bool out_is_mine = bytes_of(out) == address(rank_);
  const bool start_in_place = out_is_mine && (rank_ == 0 || (rank_ == 1 && commutes_exactly(op)));
  scratch_.resize(static_cast<size_t>(2 * per_piece * element));
  uint8_t* piece = scratch_.data();
  uint8_t* acc_buffer = scratch_.data() + per_piece * element;
  for (int64_t at = 0; at < out.numel(); at += per_piece) {
    const int64_t n = std::min(per_piece, out.numel() - at);
    const int64_t offset = at * element, bytes = n * element;
    at::Tensor target = out.narrow(0, at, n);
    const auto other = [&](int r) {
      if (r == rank_) return view_of(address(r) + offset, n, out);
      read_from(r, address(r) + offset, piece, bytes, what);
      return view_of(piece, n, out);
    };
    if (start_in_place) {
      for (int r = 0; r < world(); ++r)
        if (r != rank_) combine(target, other(r), op);
    } else {
      // From rank 0's piece on, in rank order; in scratch when the target is this rank's own
      // piece, which the reduction still reads.
      at::Tensor acc = out_is_mine ? view_of(acc_buffer, n, out) : target;
      read_from(0, address(0) + offset, bytes_of(acc), bytes, what);
      for (int r = 1; r < world(); ++r) combine(acc, other(r), op);
      if (out_is_mine) std::memcpy(bytes_of(target), acc_buffer, static_cast<size_t>(bytes));
    }
    if (each_piece) each_piece(target, offset);
  }
}

// As rank threads do in place: this rank reduces its share, a piece at a time, into its own
// tensor, and writes each finished piece into every peer's tensor while it is still in cache.
// Each byte is read once from memory and written once to each rank, with one barrier after.
// (Reading the others' shares back after a second barrier read every byte from memory twice.)
void Collectives::all_reduce_by_peer_reads(at::Tensor& tensor, c10d::ReduceOp op) {
  const int64_t element = tensor.element_size();
  const int64_t n = tensor.numel();
  const int64_t lo = n * rank_ / world(), hi = n * (rank_ + 1) / world();
  publish(0, tensor);
  sync_with_peers_present("all_reduce");
  if (hi > lo) {
    at::Tensor share = tensor.view({-1}).narrow(0, lo, hi - lo);
    const int64_t share_at = lo * element;
    reduce_share_from_peers([&](int r) { return published(r, 0) + share_at; }, share, op,
                            "all_reduce",
                            [&](at::Tensor piece, int64_t offset) {
                              finish_reduction(piece, op, world());
                              for (int r = 0; r < world(); ++r)
                                write_to(r, bytes_of(piece), published(r, 0) + share_at + offset,
                                         nbytes(piece), "all_reduce");
                            });
  }
  sync("all_reduce");
}

void Collectives::all_gather_by_peer_reads(std::vector<at::Tensor>& outputs,
                                           const at::Tensor& input) {
  publish(0, input);
  sync_with_peers_present("all_gather");
  const int64_t bytes = input.numel() * static_cast<int64_t>(input.element_size());
  for (int r = 0; r < world(); ++r)
    read_from(r, published(r, 0), bytes_of(outputs[r]), bytes, "all_gather");
  sync("all_gather");
}

void Collectives::reduce_scatter_by_peer_reads(at::Tensor& output,
                                               const std::vector<at::Tensor>& inputs,
                                               c10d::ReduceOp op) {
  for (int d = 0; d < world(); ++d) publish(d, inputs[d]);
  sync_with_peers_present("reduce_scatter");
  at::Tensor out = output.view({-1});
  reduce_share_from_peers([&](int r) { return published(r, rank_); }, out, op, "reduce_scatter");
  finish_reduction(out, op, world());
  sync("reduce_scatter");
}

}  // namespace shardscope::shm
