#include "engine/comm/shm/device_collectives.h"

#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>

#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "engine/comm/shm/reduce_ops.h"

namespace shardscope::shm {

namespace {

// What a rank publishes of its tensor, in its RankArea's `published` words.
enum Word : int {
  kAddress = 0,    // the tensor's data in its own process (rank threads read it there)
  kDevice = 1,     // its CUDA device index
  kIpcOffset = 2,  // the data's offset in the allocation the IPC handle opens
  kIpcLength = 3,  // the handle's length in bytes (0: none, every peer is a thread of this process)
  kIpcHandle = 4,  // the handle's bytes
};
constexpr size_t kHandleWords = sizeof(RankArea::published) / sizeof(uint64_t) - kIpcHandle;

// Opened allocations kept before the cache starts again: a peer that frees and allocates anew
// (empty_cache) hands out new handles, and the old ones would otherwise stay open for good.
constexpr size_t kMostOpened = 256;

// out <- the reduction of source(0), source(1), ... in rank order. `out` may be this rank's own
// source: rank 0 (and rank 1, where the op commutes exactly) reduce into it in place, the others
// in scratch, since their own value is read after rank 0's.
void reduce_in_rank_order(at::Tensor out, int rank, int world,
                          const std::function<at::Tensor(int)>& source, c10d::ReduceOp op) {
  const bool out_is_mine = out.data_ptr() == source(rank).data_ptr();
  if (out_is_mine && (rank == 0 || (rank == 1 && commutes_exactly(op)))) {
    for (int r = 0; r < world; ++r)
      if (r != rank) combine(out, source(r), op);
    return;
  }
  at::Tensor acc = out_is_mine ? source(0).clone() : out;
  if (!out_is_mine) acc.copy_(source(0));
  for (int r = 1; r < world; ++r) combine(acc, source(r), op);
  if (out_is_mine) out.copy_(acc);
}

// The current CUDA device for a collective's scope (none for host tensors, which tests use).
class DeviceGuard {
 public:
  explicit DeviceGuard(const c10::Device& device) {
    if (device.is_cuda()) guard_.set_device(device);
  }

 private:
  c10::cuda::OptionalCUDAGuard guard_;
};

}  // namespace

bool DeviceCollectives::takes(const at::Tensor& t, bool peers_are_threads) {
  if (!t.is_contiguous()) return false;
  const char* how = std::getenv("SHARDSCOPE_SHM_CUDA");
  if (how != nullptr && std::strcmp(how, "everywhere") == 0)
    return t.is_cuda() || (t.is_cpu() && peers_are_threads);
  return t.is_cuda() && (how == nullptr || std::strcmp(how, "host") != 0);
}

void DeviceCollectives::finish_stream(const at::Tensor& like) const {
  if (like.is_cuda()) c10::cuda::getCurrentCUDAStream(like.device().index()).synchronize();
}

void DeviceCollectives::publish(const at::Tensor& t) {
  finish_stream(t);  // what made the tensor is done before a peer reads it
  auto& words = segment_.rank_area(rank_).published;
  words[kAddress].store(reinterpret_cast<uint64_t>(t.data_ptr()), std::memory_order_relaxed);
  words[kDevice].store(static_cast<uint64_t>(static_cast<int64_t>(t.device().index())),
                       std::memory_order_relaxed);
  uint64_t length = 0;
  if (t.is_cuda() && !peers_are_threads_) {
    // The handle names the whole cudaMalloc segment the allocator carved the storage from.
    void* storage = t.storage().data_ptr().get();
    const auto shared = c10::cuda::CUDACachingAllocator::shareIpcHandle(storage);
    if (shared.handle.size() > kHandleWords * sizeof(uint64_t))
      throw std::runtime_error("shm: a CUDA IPC handle of " + std::to_string(shared.handle.size()) +
                               " bytes does not fit");
    const auto offset = static_cast<uint64_t>(
        shared.offset + (static_cast<const char*>(t.data_ptr()) - static_cast<char*>(storage)));
    words[kIpcOffset].store(offset, std::memory_order_relaxed);
    uint64_t packed[kHandleWords] = {};
    std::memcpy(packed, shared.handle.data(), shared.handle.size());
    for (size_t i = 0; i < kHandleWords; ++i)
      words[kIpcHandle + i].store(packed[i], std::memory_order_relaxed);
    length = shared.handle.size();
  }
  // The barrier that follows publishes these words to the peers (release there, acquire there).
  words[kIpcLength].store(length, std::memory_order_release);
}

uint8_t* DeviceCollectives::peer_base(int rank) {
  const auto& words = segment_.rank_area(rank).published;
  const uint64_t length = words[kIpcLength].load(std::memory_order_acquire);
  uint64_t packed[kHandleWords];
  for (size_t i = 0; i < kHandleWords; ++i)
    packed[i] = words[kIpcHandle + i].load(std::memory_order_relaxed);
  const std::string handle(reinterpret_cast<const char*>(packed), length);
  auto found = opened_.find(handle);
  if (found == opened_.end()) {
    if (opened_.size() >= kMostOpened) opened_.clear();
    found = opened_.emplace(handle, c10::cuda::CUDACachingAllocator::getIpcDevPtr(handle)).first;
  }
  return static_cast<uint8_t*>(found->second.get());
}

at::Tensor DeviceCollectives::peer_tensor(int rank, int64_t offset, int64_t elements,
                                          const at::Tensor& like) {
  const auto& words = segment_.rank_area(rank).published;
  const auto device = static_cast<int64_t>(words[kDevice].load(std::memory_order_acquire));
  if (device != static_cast<int64_t>(like.device().index())) {
    throw std::invalid_argument("shm: rank " + std::to_string(rank) +
                                "'s tensor is on cuda:" + std::to_string(device) +
                                ", this rank's on cuda:" + std::to_string(like.device().index()) +
                                "; the ranks of an shm group share one device (or use NCCL)");
  }
  uint8_t* data = peers_are_threads_
                      ? reinterpret_cast<uint8_t*>(words[kAddress].load(std::memory_order_acquire))
                      : peer_base(rank) + words[kIpcOffset].load(std::memory_order_acquire);
  return at::from_blob(data + offset, {elements}, like.options());
}

void DeviceCollectives::all_reduce(at::Tensor& tensor, c10d::ReduceOp op) {
  check_reduction(op, tensor);
  const DeviceGuard guard(tensor.device());
  at::Tensor flat = tensor.view({-1});
  const int64_t n = flat.numel(), element = flat.element_size();
  const auto lo = [&](int r) { return n * r / world(); };
  const auto part = [&](int r, int of) {
    const int64_t count = lo(of + 1) - lo(of);
    return r == rank_ ? flat.narrow(0, lo(of), count)
                      : peer_tensor(r, lo(of) * element, count, flat);
  };
  publish(flat);
  barriers_.sync_with_peers_present("all_reduce");
  // This rank reduces its share of every rank's tensor into its own; then reads the others'.
  if (lo(rank_ + 1) > lo(rank_)) {
    at::Tensor share = part(rank_, rank_);
    reduce_in_rank_order(
        share, rank_, world(), [&](int r) { return part(r, rank_); }, op);
    finish_reduction(share, op, world());
  }
  finish_stream(flat);
  barriers_.barrier("all_reduce");
  for (int r = 0; r < world(); ++r)
    if (r != rank_ && lo(r + 1) > lo(r)) part(rank_, r).copy_(part(r, r));
  finish_stream(flat);
  barriers_.barrier("all_reduce");
}

void DeviceCollectives::all_gather(at::Tensor& output, const at::Tensor& input) {
  const DeviceGuard guard(input.device());
  at::Tensor out = output.view({-1});
  const at::Tensor in = input.view({-1});
  const int64_t m = in.numel();
  publish(in);
  barriers_.sync_with_peers_present("all_gather");
  for (int r = 0; r < world(); ++r) {
    at::Tensor mine = out.narrow(0, r * m, m);
    const at::Tensor theirs = r == rank_ ? in : peer_tensor(r, 0, m, in);
    if (mine.data_ptr() != theirs.data_ptr()) mine.copy_(theirs);  // FSDP gathers in place
  }
  finish_stream(in);
  barriers_.barrier("all_gather");
}

void DeviceCollectives::reduce_scatter(at::Tensor& output, const at::Tensor& input,
                                       c10d::ReduceOp op) {
  check_reduction(op, input);
  const DeviceGuard guard(input.device());
  at::Tensor out = output.view({-1});
  const at::Tensor in = input.view({-1});
  const int64_t m = out.numel(), element = in.element_size();
  publish(in);
  barriers_.sync_with_peers_present("reduce_scatter");
  const auto part = [&](int r) {
    return r == rank_ ? in.narrow(0, rank_ * m, m) : peer_tensor(r, rank_ * m * element, m, in);
  };
  reduce_in_rank_order(out, rank_, world(), part, op);
  finish_reduction(out, op, world());
  finish_stream(in);
  barriers_.barrier("reduce_scatter");
}

}  // namespace shardscope::shm
