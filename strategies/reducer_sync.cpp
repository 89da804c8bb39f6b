#include "strategies/reducer_sync.h"

#include <limits>
#include <unordered_map>

#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include "engine/comm.h"
#include "profiling/memory_tags.h"

namespace shardscope {
namespace {

// DDP's first bucket is kept small so that the last layers' gradients start reducing early.
constexpr int64_t kDefaultFirstBucketBytes = 1024 * 1024;

// Routes the Reducer's bucket all-reduces through our traced Comm. With a hook installed the
// Reducer no longer divides by the world size, so the hook averages.
class TracedAllReduceHook final : public c10d::CppCommHookInterface<Comm*> {
 public:
  explicit TracedAllReduceHook(Comm* comm) : c10d::CppCommHookInterface<Comm*>(comm) {}

  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    at::Tensor& buffer = bucket.getBufferRef();
    buffer.div_(state_->size());
    return state_->all_reduce_async(buffer).future({buffer});
  }
};

}  // namespace

ReducerSync::ReducerSync(const std::vector<torch::Tensor>& params,
                         const std::vector<std::string>& names, Comm& comm,
                         const StrategyOptions& options, int64_t cap_bytes)
    : find_unused_(options.find_unused_parameters) {
  const bool default_cap = options.bucket_mb == 0.0;
  // As DDP does: before the first backward the real gradient order is unknown, so without
  // unused-parameter detection everything starts in one bucket and is re-bucketed later.
  std::vector<size_t> limits{std::numeric_limits<size_t>::max()};
  if (find_unused_) {
    limits = default_cap
                 ? std::vector<size_t>{kDefaultFirstBucketBytes, static_cast<size_t>(cap_bytes)}
                 : std::vector<size_t>{static_cast<size_t>(cap_bytes)};
  }
  std::vector<bool> sparse(params.size(), false);
  auto [buckets, per_bucket_limits] =
      c10d::compute_bucket_assignment_by_size(params, limits, sparse);
  // The Reducer's buckets hold a copy of every gradient while it is reduced.
  profiling::MemoryTag bucket_buffers(profiling::MemoryKind::kCommBuffers);
  (void)per_bucket_limits;
  std::reverse(buckets.begin(), buckets.end());

  std::unordered_map<size_t, std::string> index_names;
  for (size_t i = 0; i < names.size(); ++i) index_names[i] = names[i];
  reducer_ = std::make_shared<c10d::Reducer>(
      params, buckets, comm.process_group(), sparse, cap_bytes, find_unused_,
      /*gradient_as_bucket_view=*/false, index_names,
      /*first_bucket_bytes_cap=*/default_cap ? kDefaultFirstBucketBytes : cap_bytes,
      /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false,
      /*bucket_bytes_cap_list=*/std::vector<int64_t>{});
  reducer_->register_comm_hook(std::make_unique<TracedAllReduceHook>(&comm));
}

ReducerSync::~ReducerSync() = default;

void ReducerSync::before_forward() {
  profiling::MemoryTag buckets(profiling::MemoryKind::kCommBuffers);  // rebuilt buckets
  reducer_->rebuild_buckets();
}

void ReducerSync::arm(const std::vector<torch::Tensor>& outputs) {
  reducer_->prepare_for_forward();
  reducer_->prepare_for_backward(find_unused_ ? outputs : std::vector<torch::Tensor>{});
}

}  // namespace shardscope
