#pragma once

#include <functional>
#include <vector>

#include "app/analysis/shared_gpu_streams.h"

namespace shardscope::analysis {

// How a data-parallel step's communication meets its compute, as our strategies run it, on a
// compute stream and the communicator's stream beside it (one collective after another, each
// from the moment it is issued). `sharing`: how the two share the GPU (shared_gpu_streams.h);
// the default: neither slows the other.

// ZeRO-3 (our `fsdp`) trains unit by unit: each unit's parameters are all-gathered before its
// forward and again before its backward, and its gradients reduce-scattered once its backward is
// done. The collectives run one after another on the communicator's stream, beside the compute
// stream. With prefetch, the next unit's gather is issued as a unit starts computing (forward:
// the one after it; backward: the one before it), so it hides behind that unit's compute; without
// it, each gather is issued when its unit needs it. A micro-batch ends when its last
// reduce-scatter has, since the next one's gathers wait behind it.
struct UnitWork {
  double forward_s = 0, backward_s = 0;  // its compute, in one micro-batch
  double gather_s = 0;                   // the all-gather of its parameters before its forward
  double regather_s = 0;                 // and before its backward (0: still held)
  double reduce_s = 0;                   // one reduce-scatter of its gradients (0: none here)
  // The share of its forward's and its backward's time its kernels fill.
  double forward_busy = 1, backward_busy = 1;
};

struct UnitPassTime {
  double span_s = 0;     // from the first gather to the last reduce-scatter
  double compute_s = 0;  // the compute stream's work, as long as it takes alone on the GPU
};

// One micro-batch through `units` in forward order (backward runs them in reverse). `timeline`,
// if given, receives both streams.
UnitPassTime sharded_unit_pass(const std::vector<UnitWork>& units, bool prefetch,
                               StreamTimeline* timeline = nullptr, const GpuSharing& sharing = {});

// A unit's backward in the last micro-batch, and the bytes of the gradients it produces, tensor
// by tensor in the order backward produces them.
struct GradientUnit {
  double backward_s = 0;
  std::vector<double> tensor_bytes;
  double busy = 1;  // the share of its backward's time its kernels fill
};
// A bucket of gradients, ready when the backward of `unit` (an index into the units) ends.
struct GradientBucket {
  double bytes = 0;
  size_t unit = 0;
};
// Buckets as our strategies plan them (strategies/data_parallel/bucket_plan.cpp): whole tensors
// in the order backward produces them (backward runs the units last first), each bucket closed
// by the tensor that brings it to `cap_bytes` (the first to `first_cap_bytes`: DDP's Reducer
// keeps its first bucket small); the last holds what is left. `cap_bytes` 0: one per tensor.
std::vector<GradientBucket> plan_gradient_buckets(const std::vector<GradientUnit>& units,
                                                  double cap_bytes, double first_cap_bytes);

// The gradient sync of a replicated data-parallel strategy (DDP, ZeRO-1 and 2) in the last
// micro-batch's backward: with `overlap`, each bucket is reduced once the unit that completes it
// is done, one after another; without, all of them once backward is over. `collective_s`: what
// one collective of that many bytes takes. `max_in_flight` > 0: the backward waits, each time it
// issues one, until no more than that many are unfinished (ZeRO-2 keeps two). Returns how much
// the sync adds to backward: its waits, the slowdown of the backward beside the collectives, and
// what runs past its end. `timeline`, if given, receives when the backward and the collectives
// ran, from the start of backward.
double gradient_sync_tail(const std::vector<GradientUnit>& units,
                          const std::vector<GradientBucket>& buckets, bool overlap,
                          const std::function<double(double bytes)>& collective_s,
                          int max_in_flight = 0, StreamTimeline* timeline = nullptr,
                          const GpuSharing& sharing = {});

}  // namespace shardscope::analysis
