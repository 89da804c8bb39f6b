#include "engine/comm/shm/reduce_ops.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

namespace shardscope::shm {

at::Tensor view_of(const uint8_t* data, int64_t elements, const at::Tensor& like) {
  return at::from_blob(const_cast<uint8_t*>(data), {elements}, like.options().device(at::kCPU));
}

namespace {

// The collectives run on the backend's worker thread, beside the rank's compute. An ATen op on
// more than at::internal::GRAIN_SIZE elements fans out over the process's intra-op pool. A rank
// process on a GPU sizes that pool to every core (it computes on the device), so four of them
// reducing at once on a 16-core H100 host ran 64 spinning OpenMP threads on 16 cores: a `small`
// step of ddp_bucketed took 3.7 s over shm against 0.14 s over Gloo, whose reductions are its
// own loops. So every op here runs on this thread alone, in pieces of at most the grain size (ATen
// forks only above it), which
// gives the same values (elementwise ops do not depend on how they are split).
constexpr int64_t kSerialPiece = at::internal::GRAIN_SIZE;

// out <- a (op) b. `out` may be `a` (acc <- acc (op) b); the values are the same either way.
void combine_piece(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, c10d::ReduceOp op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::AVG:
      at::add_out(out, a, b);
      return;
    case c10d::ReduceOp::PRODUCT:
      at::mul_out(out, a, b);
      return;
    case c10d::ReduceOp::MIN:
      at::minimum_out(out, a, b);
      return;
    case c10d::ReduceOp::MAX:
      at::maximum_out(out, a, b);
      return;
    case c10d::ReduceOp::BAND:
      at::bitwise_and_out(out, a, b);
      return;
    case c10d::ReduceOp::BOR:
      at::bitwise_or_out(out, a, b);
      return;
    case c10d::ReduceOp::BXOR:
      at::bitwise_xor_out(out, a, b);
      return;
    default:
      throw std::invalid_argument("the shm backend does not support this reduce op");
  }
}

}  // namespace

void combine(at::Tensor& acc, const at::Tensor& other, c10d::ReduceOp op) {
  at::Tensor a = acc.view({-1});
  const at::Tensor b = other.reshape({-1});
  // A device's op is one kernel, whatever its size: the pieces are for the host's intra-op pool.
  if (!a.is_cpu()) return combine_piece(a, a, b, op);
  const int64_t n = a.numel();
  for (int64_t at = 0; at < n; at += kSerialPiece) {
    const int64_t len = std::min(kSerialPiece, n - at);
    at::Tensor piece = a.narrow(0, at, len);
    combine_piece(piece, piece, b.narrow(0, at, len), op);
  }
}

void reduce_sources(at::Tensor out, const std::vector<const uint8_t*>& sources, c10d::ReduceOp op,
                    const std::function<void(int64_t, int64_t)>& each_piece) {
  at::Tensor flat = out.view({-1});
  const int64_t n = flat.numel();
  const int64_t element = flat.element_size();
  const uint8_t* const target_bytes = bytes_of(flat);
  // A target that is a later source is still read when its piece is combined: reduce in scratch.
  const bool target_is_later_source =
      std::find(sources.begin() + std::min<size_t>(1, sources.size()), sources.end(),
                target_bytes) != sources.end();
  at::Tensor scratch;
  if (target_is_later_source) scratch = at::empty({std::min(n, kSerialPiece)}, flat.options());
  for (int64_t at = 0; at < n; at += kSerialPiece) {
    const int64_t len = std::min(kSerialPiece, n - at);
    at::Tensor target = flat.narrow(0, at, len);
    at::Tensor acc = target_is_later_source ? scratch.narrow(0, 0, len) : target;
    const auto source = [&](size_t r) { return view_of(sources[r] + at * element, len, flat); };
    if (sources.size() == 1) {
      if (sources[0] != bytes_of(acc))
        std::memcpy(bytes_of(acc), sources[0] + at * element, len * element);
    } else {
      combine_piece(acc, source(0), source(1), op);
    }
    for (size_t r = 2; r < sources.size(); ++r) combine_piece(acc, acc, source(r), op);
    finish_reduction(acc, op, static_cast<int>(sources.size()));
    if (target_is_later_source) std::memcpy(bytes_of(target), bytes_of(acc), len * element);
    if (each_piece) each_piece(at, len);
  }
}

void finish_reduction(at::Tensor& t, c10d::ReduceOp op, int world) {
  if (op.op_ != c10d::ReduceOp::AVG) return;
  at::Tensor flat = t.view({-1});
  if (!flat.is_cpu()) {
    flat.div_(world);  // one kernel on a device, as combine
    return;
  }
  const int64_t n = flat.numel();
  for (int64_t at = 0; at < n; at += kSerialPiece)
    flat.narrow(0, at, std::min(kSerialPiece, n - at)).div_(world);
}

void check_reduction(c10d::ReduceOp op, const at::Tensor& t) {
  const bool bitwise = op.op_ == c10d::ReduceOp::BAND || op.op_ == c10d::ReduceOp::BOR ||
                       op.op_ == c10d::ReduceOp::BXOR;
  const bool known = bitwise || op.op_ == c10d::ReduceOp::SUM || op.op_ == c10d::ReduceOp::AVG ||
                     op.op_ == c10d::ReduceOp::PRODUCT || op.op_ == c10d::ReduceOp::MIN ||
                     op.op_ == c10d::ReduceOp::MAX;
  if (!known) throw std::invalid_argument("the shm backend does not support this reduce op");
  if (bitwise && at::isFloatingType(t.scalar_type()))
    throw std::invalid_argument("shm: bitwise reductions take integer tensors");
  if (op.op_ == c10d::ReduceOp::AVG && !at::isFloatingType(t.scalar_type()))
    throw std::invalid_argument("shm: AVG takes floating-point tensors");
}

bool commutes_exactly(c10d::ReduceOp op) {
  return op.op_ == c10d::ReduceOp::SUM || op.op_ == c10d::ReduceOp::AVG ||
         op.op_ == c10d::ReduceOp::PRODUCT || op.op_ == c10d::ReduceOp::BAND ||
         op.op_ == c10d::ReduceOp::BOR || op.op_ == c10d::ReduceOp::BXOR;
}

}  // namespace shardscope::shm
