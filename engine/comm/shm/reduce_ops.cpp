#include "engine/comm/shm/reduce_ops.h"

#include <stdexcept>

#include <ATen/ATen.h>

namespace shardscope::shm {

at::Tensor view_of(const uint8_t* data, int64_t elements, const at::Tensor& like) {
  return at::from_blob(const_cast<uint8_t*>(data), {elements}, like.options().device(at::kCPU));
}

void combine(at::Tensor& acc, const at::Tensor& other, c10d::ReduceOp op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::AVG:
      acc.add_(other);
      return;
    case c10d::ReduceOp::PRODUCT:
      acc.mul_(other);
      return;
    case c10d::ReduceOp::MIN:
      at::minimum_out(acc, acc, other);
      return;
    case c10d::ReduceOp::MAX:
      at::maximum_out(acc, acc, other);
      return;
    case c10d::ReduceOp::BAND:
      acc.bitwise_and_(other);
      return;
    case c10d::ReduceOp::BOR:
      acc.bitwise_or_(other);
      return;
    case c10d::ReduceOp::BXOR:
      acc.bitwise_xor_(other);
      return;
    default:
      throw std::invalid_argument("the shm backend does not support this reduce op");
  }
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
