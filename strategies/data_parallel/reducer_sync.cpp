#include "strategies/data_parallel/reducer_sync.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include "engine/comm/comm.h"
#include "engine/launch/device_turns.h"
#include "profiling/record/host_tracing.h"
#include "profiling/record/memory_tags.h"

namespace shardscope {
namespace {

// DDP's first bucket is kept small so that the last layers' gradients start reducing early.
constexpr int64_t kDefaultFirstBucketBytes = 1024 * 1024;

// Routes the Reducer's bucket all-reduces through our traced Comm. With a hook installed the
// Reducer no longer divides by the world size, so the hook averages. Each bucket's work is kept
// until backward's end, where ReducerSync waits for it through Comm (see arm()).
class TracedAllReduceHook final : public c10d::CppCommHookInterface<Comm*> {
 public:
  TracedAllReduceHook(Comm* comm, std::shared_ptr<std::vector<CommWork>> in_flight)
      : c10d::CppCommHookInterface<Comm*>(comm), in_flight_(std::move(in_flight)) {}

  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    at::Tensor& buffer = bucket.getBufferRef();
    buffer.div_(state_->size());
    CommWork work = state_->all_reduce_async(buffer);
    in_flight_->push_back(work);
    return work.future({buffer});
  }

 private:
  std::shared_ptr<std::vector<CommWork>> in_flight_;
};

}  // namespace

ReducerSync::ReducerSync(const std::vector<torch::Tensor>& params,
                         const std::vector<std::string>& names, Comm& comm,
                         const StrategyOptions& options, int64_t cap_bytes)
    : in_flight_(std::make_shared<std::vector<CommWork>>()),
      find_unused_(options.find_unused_parameters) {
  const bool default_cap = options.bucket_mb == 0.0;
  // As DDP does: before the first backward the real gradient order is unknown, so without
  // unused-parameter detection everything starts in one bucket and is re-bucketed later.
  std::vector<size_t> limits{std::numeric_limits<size_t>::max()};
  if (find_unused_) {
    limits = default_cap ? std::vector<size_t>{static_cast<size_t>(
                                                   std::min(kDefaultFirstBucketBytes, cap_bytes)),
                                               static_cast<size_t>(cap_bytes)}
                         : std::vector<size_t>{static_cast<size_t>(cap_bytes)};
  }
  std::vector<bool> sparse(params.size(), false);
  auto [buckets, per_bucket_limits] =
      c10d::compute_bucket_assignment_by_size(params, limits, sparse);
  // The Reducer's buckets hold a copy of every gradient while it is reduced, and keep it between
  // steps, when .grad is freed: they are where this rank keeps its gradients, and the Memory
  // tab counts them as gradients, as the ZeRO paper's formula does (its text: DDP replicates
  // gradients, ZeRO-2 divides them).
  profiling::MemoryTag bucket_buffers(profiling::MemoryKind::kGradients);
  (void)per_bucket_limits;
  std::reverse(buckets.begin(), buckets.end());

  std::unordered_map<size_t, std::string> index_names;
  for (size_t i = 0; i < names.size(); ++i) index_names[i] = names[i];
  reducer_ = std::make_shared<c10d::Reducer>(
      params, buckets, comm.process_group(), sparse, cap_bytes, find_unused_,
      /*gradient_as_bucket_view=*/false, index_names,
      /*first_bucket_bytes_cap=*/
      default_cap ? std::min(kDefaultFirstBucketBytes, cap_bytes) : cap_bytes,
      /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false,
      /*bucket_bytes_cap_list=*/std::vector<int64_t>{});
  reducer_->register_comm_hook(std::make_unique<TracedAllReduceHook>(&comm, in_flight_));
}

ReducerSync::~ReducerSync() = default;

void ReducerSync::before_forward() {
  // Rebuilding (once, in the second step) broadcasts rank 0's bucket order, waiting outside our
  // Comm: not on the device. Any other step keeps its turn: a rank that gave it up for nothing
  // would queue behind its peers' compute, and time lost to the host's scheduler shows as work.
  if (!reducer_->should_rebuild_buckets()) return;
  DeviceTurns::Release give_up_the_device;
  profiling::MemoryTag buckets(profiling::MemoryKind::kGradients);  // rebuilt buckets
  if (!armed_once_) {  // before any backward there is no order to rebuild by: nothing happens
    reducer_->rebuild_buckets();
    return;
  }
  // Named on the host lane: the gap it leaves before this step's forward is DDP's, not ours.
  profiling::ScopedSpan span(profiling::Category::kOther, kRebuildBucketsSpan);
  reducer_->rebuild_buckets();
}

void ReducerSync::after_backward() {
  DeviceTurns::take_back();
}

void ReducerSync::arm(const std::vector<torch::Tensor>& outputs) {
  armed_once_ = true;
  reducer_->prepare_for_forward();
  reducer_->prepare_for_backward(find_unused_ ? outputs : std::vector<torch::Tensor>{});
  // The Reducer waits for its buckets (and, finding unused parameters, for their all_reduce) in
  // its own end-of-backward callback, on futures, where nothing sees the wait: a rank taking
  // turns on a shared device would keep the device while its peers need it to finish their
  // backward (a deadlock), and the trace would count the wait as compute. A callback queued as
  // backward starts runs before the Reducer's (callbacks run in order): it gives the device up
  // until after_backward() and waits for every bucket through Comm, recorded as a wait.
  auto in_flight = in_flight_;
  for (const auto& output : outputs) {
    if (!output.requires_grad()) continue;
    output.register_hook([in_flight](const torch::Tensor&) {
      torch::autograd::Engine::get_default_engine().queue_callback([in_flight] {
        DeviceTurns::give_up_until_taken_back();
        for (CommWork& work : *in_flight) work.wait();
        in_flight->clear();
        // The Reducer's own callback, next, copies the reduced buckets into the gradients: work
        // on the device, so with the device's turn, as ddp_bucketed's unflattening is.
        DeviceTurns::take_back();
      });
    });
    break;
  }
}

}  // namespace shardscope
