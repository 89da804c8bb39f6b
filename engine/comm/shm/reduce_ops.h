#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

namespace shardscope::shm {

// What the shm collectives do to a tensor's bytes and values, whichever path carries them.

inline uint8_t* bytes_of(const at::Tensor& t) {
  return static_cast<uint8_t*>(t.data_ptr());
}

inline int64_t nbytes(const at::Tensor& t) {
  return t.numel() * static_cast<int64_t>(t.element_size());
}

// `elements` of `like`'s dtype at `data`, on the host.
at::Tensor view_of(const uint8_t* data, int64_t elements, const at::Tensor& like);

// acc <- acc (op) other, elementwise, on this thread alone (never the intra-op pool: see the
// .cpp); on a device, one kernel. Both contiguous.
void combine(at::Tensor& acc, const at::Tensor& other, c10d::ReduceOp op);
// out <- ((s0 (op) s1) (op) s2) ..., elementwise, in the sources' order, AVG divided at the end:
// one piece of at most the grain size at a time through every source, so the partial result
// stays in cache instead of going through memory once a source. Each source holds out.numel()
// elements of out's dtype; `out` may be one of them (the first is reduced into in place, a later
// one through scratch), but must not overlap one in part. `each_piece(at, n)` runs once elements
// [at, at + n) of `out` are final, while they are still in cache. On this thread alone, as combine.
void reduce_sources(at::Tensor out, const std::vector<const uint8_t*>& sources, c10d::ReduceOp op,
                    const std::function<void(int64_t at, int64_t n)>& each_piece = nullptr);
// What ends a reduction over `world` ranks: AVG divides the sum, the other ops leave it.
void finish_reduction(at::Tensor& t, c10d::ReduceOp op, int world);

// Refused before the first barrier, on every rank alike: a reduction that would throw on some
// ranks only (those with a share) would leave the others waiting.
void check_reduction(c10d::ReduceOp op, const at::Tensor& t);

// a (op) b is bitwise b (op) a: IEEE addition and multiplication commute exactly, as do the
// bitwise ops. (MIN and MAX may not, for +0 and -0.)
bool commutes_exactly(c10d::ReduceOp op);

}  // namespace shardscope::shm
