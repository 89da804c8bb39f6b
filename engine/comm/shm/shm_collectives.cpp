#include "engine/comm/shm/shm_collectives.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <ATen/ATen.h>

#include "engine/comm/shm/reduce_ops.h"

namespace shardscope::shm {

namespace {

// Reduces, in rank order, out.numel() elements at byte `offset` of each rank's slot of `buffer`
// into `out`.
void reduce_slots(const Segment& segment, int buffer, size_t offset, at::Tensor out,
                  c10d::ReduceOp op) {
  std::vector<const uint8_t*> slots;
  for (int r = 0; r < segment.layout().world; ++r)
    slots.push_back(segment.slot(buffer, r) + offset);
  reduce_sources(out, slots, op);
}

}  // namespace

void Collectives::sync(const std::string& what) {
  shm::barrier(segment_, rank_, ++barriers_, std::chrono::milliseconds(timeout_ms_.load()), what);
}

void Collectives::sync_with_peers_present(const std::string& what) {
  sync(what);
  for (int r = 0; r < world(); ++r) {
    if (r != rank_ && segment_.rank_area(r).gone.load(std::memory_order_acquire) != 0)
      throw PeerFailure("rank " + std::to_string(r) + " left the group during " + what);
  }
}

void Collectives::barrier(const std::string& what) {
  sync(what);
}

void Collectives::in_rounds(int64_t total, int64_t per_round,
                            const std::function<void(int64_t at, int64_t n, int buffer)>& round) {
  for (int64_t at = 0; at < total; at += per_round)
    round(at, std::min(per_round, total - at), next_buffer());
}

uint8_t* Collectives::published(int rank, int index) const {
  return reinterpret_cast<uint8_t*>(
      segment_.rank_area(rank).published[index].load(std::memory_order_acquire));
}

void Collectives::publish(int index, const at::Tensor& t) {
  segment_.rank_area(rank_).published[index].store(reinterpret_cast<uint64_t>(t.data_ptr()),
                                                   std::memory_order_release);
}

// Each collective below: publish, a barrier, this rank's share of the work on every rank's
// tensors, a barrier (no rank returns, and so changes its tensors, while a peer still reads them).
void Collectives::all_reduce_in_place(at::Tensor& tensor, c10d::ReduceOp op) {
  const int64_t element = tensor.element_size();
  const int64_t n = tensor.numel();
  publish(0, tensor);
  sync_with_peers_present("all_reduce");
  const int64_t lo = n * rank_ / world(), hi = n * (rank_ + 1) / world();
  if (hi > lo) {
    // Rank 0's tensor gathers the share in rank order; each piece goes on to the other ranks'
    // tensors as soon as it is final, while it is still in cache.
    std::vector<const uint8_t*> shares;
    for (int r = 0; r < world(); ++r) shares.push_back(published(r, 0) + lo * element);
    at::Tensor share = view_of(published(0, 0) + lo * element, hi - lo, tensor);
    reduce_sources(share, shares, op, [&](int64_t at, int64_t len) {
      for (int r = 1; r < world(); ++r)
        std::memcpy(published(r, 0) + (lo + at) * element, shares[0] + at * element, len * element);
    });
  }
  sync("all_reduce");
}

void Collectives::all_gather_in_place(std::vector<at::Tensor>& outputs, const at::Tensor& input) {
  publish(0, input);
  sync_with_peers_present("all_gather");
  for (int r = 0; r < world(); ++r) {
    // An output that is this rank's input already holds it (FSDP gathers in place).
    if (bytes_of(outputs[r]) != published(r, 0))
      std::memcpy(bytes_of(outputs[r]), published(r, 0), nbytes(input));
  }
  sync("all_gather");
}

void Collectives::reduce_scatter_in_place(at::Tensor& output, const std::vector<at::Tensor>& inputs,
                                          c10d::ReduceOp op) {
  for (int d = 0; d < world(); ++d) publish(d, inputs[d]);
  sync_with_peers_present("reduce_scatter");
  // An output that is this rank's own piece of its input (an in-place reduce_scatter, as NCCL
  // allows) is still read while it is reduced: reduce_sources takes care of that.
  std::vector<const uint8_t*> pieces;
  for (int r = 0; r < world(); ++r) pieces.push_back(published(r, rank_));
  reduce_sources(output, pieces, op);
  sync("reduce_scatter");
}

void Collectives::all_reduce(at::Tensor& tensor, c10d::ReduceOp op) {
  check_reduction(op, tensor);
  if (path_ == Path::kInPlace) return all_reduce_in_place(tensor, op);
  if (path_ == Path::kPeerReads) return all_reduce_by_peer_reads(tensor, op);
  const int64_t element = tensor.element_size();
  in_rounds(tensor.numel(), static_cast<int64_t>(slot_bytes()) / element,
            [&](int64_t at, int64_t n, int b) {
              std::memcpy(segment_.slot(b, rank_), bytes_of(tensor) + at * element, n * element);
              sync("all_reduce");
              // This rank reduces its share of the round into rank 0's slot, where every rank
              // reads it.
              const int64_t lo = n * rank_ / world(), hi = n * (rank_ + 1) / world();
              if (hi > lo) {
                reduce_slots(segment_, b, lo * element,
                             view_of(segment_.slot(b, 0) + lo * element, hi - lo, tensor), op);
              }
              sync("all_reduce");
              std::memcpy(bytes_of(tensor) + at * element, segment_.slot(b, 0), n * element);
            });
}

void Collectives::broadcast(at::Tensor& tensor, int root) {
  in_rounds(nbytes(tensor), static_cast<int64_t>(slot_bytes()), [&](int64_t at, int64_t n, int b) {
    if (rank_ == root) std::memcpy(segment_.slot(b, root), bytes_of(tensor) + at, n);
    sync("broadcast");
    if (rank_ != root) std::memcpy(bytes_of(tensor) + at, segment_.slot(b, root), n);
  });
}

void Collectives::reduce(at::Tensor& tensor, int root, c10d::ReduceOp op) {
  check_reduction(op, tensor);
  const int64_t element = tensor.element_size();
  in_rounds(tensor.numel(), static_cast<int64_t>(slot_bytes()) / element,
            [&](int64_t at, int64_t n, int b) {
              std::memcpy(segment_.slot(b, rank_), bytes_of(tensor) + at * element, n * element);
              sync("reduce");
              if (rank_ == root)
                reduce_slots(segment_, b, 0, tensor.view({-1}).narrow(0, at, n), op);
            });
}

void Collectives::all_gather(std::vector<at::Tensor>& outputs, const at::Tensor& input) {
  if (path_ == Path::kInPlace) return all_gather_in_place(outputs, input);
  if (path_ == Path::kPeerReads) return all_gather_by_peer_reads(outputs, input);
  in_rounds(nbytes(input), static_cast<int64_t>(slot_bytes()), [&](int64_t at, int64_t n, int b) {
    std::memcpy(segment_.slot(b, rank_), bytes_of(input) + at, n);
    sync("all_gather");
    for (int r = 0; r < world(); ++r)
      std::memcpy(bytes_of(outputs[r]) + at, segment_.slot(b, r), n);
  });
}

void Collectives::reduce_scatter(at::Tensor& output, const std::vector<at::Tensor>& inputs,
                                 c10d::ReduceOp op) {
  check_reduction(op, output);
  if (static_cast<int>(inputs.size()) != world())
    throw std::invalid_argument("shm reduce_scatter: one input per rank expected");
  if (path_ == Path::kInPlace) return reduce_scatter_in_place(output, inputs, op);
  if (path_ == Path::kPeerReads) return reduce_scatter_by_peer_reads(output, inputs, op);
  const int64_t element = output.element_size();
  // Each round carries a piece of every destination's input: world pieces per slot.
  in_rounds(output.numel(), static_cast<int64_t>(slot_bytes()) / (element * world()),
            [&](int64_t at, int64_t n, int b) {
              for (int d = 0; d < world(); ++d)
                std::memcpy(segment_.slot(b, rank_) + d * n * element,
                            bytes_of(inputs[d]) + at * element, n * element);
              sync("reduce_scatter");
              reduce_slots(segment_, b, static_cast<size_t>(rank_ * n * element),
                           output.view({-1}).narrow(0, at, n), op);
            });
}

void Collectives::gather(std::vector<at::Tensor>& outputs, const at::Tensor& input, int root) {
  in_rounds(nbytes(input), static_cast<int64_t>(slot_bytes()), [&](int64_t at, int64_t n, int b) {
    std::memcpy(segment_.slot(b, rank_), bytes_of(input) + at, n);
    sync("gather");
    if (rank_ == root)
      for (int r = 0; r < world(); ++r)
        std::memcpy(bytes_of(outputs[r]) + at, segment_.slot(b, r), n);
  });
}

void Collectives::scatter(at::Tensor& output, const std::vector<at::Tensor>& inputs, int root) {
  in_rounds(nbytes(output), static_cast<int64_t>(slot_bytes()) / world(),
            [&](int64_t at, int64_t n, int b) {
              if (rank_ == root)
                for (int d = 0; d < world(); ++d)
                  std::memcpy(segment_.slot(b, root) + d * n, bytes_of(inputs[d]) + at, n);
              sync("scatter");
              std::memcpy(bytes_of(output) + at, segment_.slot(b, root) + rank_ * n, n);
            });
}

void Collectives::all_to_all(at::Tensor& output, const at::Tensor& input,
                             const std::vector<int64_t>& output_splits,
                             const std::vector<int64_t>& input_splits) {
  const int w = world();
  const auto byte_parts = [&](const at::Tensor& t, const std::vector<int64_t>& splits,
                              std::vector<int64_t>* offsets, std::vector<int64_t>* lengths) {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    const int64_t row_bytes = rows == 0 ? 0 : nbytes(t) / rows;
    if (!splits.empty() && static_cast<int>(splits.size()) != w)
      throw std::invalid_argument("all_to_all: one split per rank expected");
    if (splits.empty() && rows % w != 0)
      throw std::invalid_argument("all_to_all: rows do not divide equally over the ranks");
    int64_t at = 0;
    for (int r = 0; r < w; ++r) {
      const int64_t part = (splits.empty() ? rows / w : splits[r]) * row_bytes;
      offsets->push_back(at);
      lengths->push_back(part);
      at += part;
    }
    if (at != nbytes(t))
      throw std::invalid_argument("all_to_all: splits do not add up to the tensor");
  };
  std::vector<int64_t> send_at, send_len, recv_at, recv_len;
  byte_parts(input, input_splits, &send_at, &send_len);
  byte_parts(output, output_splits, &recv_at, &recv_len);
  // A slot: the byte counts this round carries to each rank and a "more to come" flag, then one
  // region per destination. Rounds go on while any rank has more to send.
  const size_t meta = (static_cast<size_t>(w) + 1) * sizeof(int64_t);
  const size_t header = (meta + 63) / 64 * 64;
  const int64_t region = static_cast<int64_t>((slot_bytes() - header) / w);
  std::vector<int64_t> sent(w, 0), got(w, 0);
  bool more = true;
  while (more) {
    const int b = next_buffer();
    uint8_t* mine = segment_.slot(b, rank_);
    auto* counts = reinterpret_cast<int64_t*>(mine);
    int64_t left = 0;
    for (int d = 0; d < w; ++d) {
      const int64_t n = std::min(region, send_len[d] - sent[d]);
      std::memcpy(mine + header + d * region, bytes_of(input) + send_at[d] + sent[d], n);
      counts[d] = n;
      sent[d] += n;
      left += send_len[d] - sent[d];
    }
    counts[w] = left > 0 ? 1 : 0;
    sync("all_to_all");
    more = false;
    for (int s = 0; s < w; ++s) {
      const uint8_t* theirs = segment_.slot(b, s);
      const auto* their_counts = reinterpret_cast<const int64_t*>(theirs);
      const int64_t n = their_counts[rank_];
      if (got[s] + n > recv_len[s])
        throw std::invalid_argument("all_to_all: rank " + std::to_string(s) +
                                    " sends more than this rank's output split for it");
      std::memcpy(bytes_of(output) + recv_at[s] + got[s], theirs + header + rank_ * region, n);
      got[s] += n;
      more = more || their_counts[w] != 0;
    }
  }
  for (int s = 0; s < w; ++s)
    if (got[s] != recv_len[s])
      throw std::invalid_argument("all_to_all: rank " + std::to_string(s) +
                                  " sent less than this rank's output split for it");
}

}  // namespace shardscope::shm
