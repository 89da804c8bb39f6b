#pragma once

#include <functional>
#include <vector>

namespace shardscope::analysis {

// How a data-parallel step's communication meets its compute, as our strategies run it, on a
// compute stream and the communicator's stream beside it (one collective after another, each
// from the moment it is issued). The compute beside a collective is not slowed.

// ZeRO-3 (our `fsdp`) trains unit by unit: each unit's parameters are all-gathered before its
// forward and again before its backward, and its gradients reduce-scattered once its backward is
// done. The collectives run one after another on the communicator's stream, beside the compute
// stream. With prefetch, the next unit's gather is issued as a unit starts computing (forward:
// the one after it; backward: the one before it), so it hides behind that unit's compute; without
// it, each gather is issued when its unit needs it. A micro-batch ends when its last
// reduce-scatter has, since the next one's gathers wait behind it.
struct UnitWork {
  double forward_s = 0, backward_s = 0;  // its compute, in one micro-batch
  double gather_s = 0;                   // one all-gather of its parameters
  double reduce_s = 0;                   // one reduce-scatter of its gradients (0: none here)
};

// What a stream was busy with, and when (seconds from the start of the pass). Back-to-back
// intervals of one kind are one interval: a timeline draws them, not each unit's.
struct StreamInterval {
  enum Kind { kForward, kBackward, kGather, kReduce } kind = kForward;
  double start = 0, end = 0;
};
struct StreamTimeline {
  std::vector<StreamInterval> compute, comm;
  void add(std::vector<StreamInterval>& stream, StreamInterval::Kind kind, double start,
           double end);
};

struct UnitPassTime {
  double span_s = 0;     // from the first gather to the last reduce-scatter
  double compute_s = 0;  // the compute stream's busy time
};

// One micro-batch through `units` in forward order (backward runs them in reverse). `timeline`,
// if given, receives both streams.
UnitPassTime sharded_unit_pass(const std::vector<UnitWork>& units, bool prefetch,
                               StreamTimeline* timeline = nullptr);

// The gradient sync of a replicated data-parallel strategy (DDP, ZeRO-1 and 2), in the last
// micro-batch's backward, which runs the units last first. A unit's gradients are ready when its
// backward ends: with `overlap`, they join the open bucket then, and each bucket that reached
// `cap_bytes` is reduced at once; what is left, and without overlap everything, goes when
// backward is over. `cap_bytes` 0: one collective per parameter tensor of the unit, each issued
// as the unit's backward ends. `collective_s`: what one collective of that many bytes takes.
// Returns how long the sync runs past the end of backward.
struct GradientUnit {
  double backward_s = 0;  // its backward, in the micro-batch
  double bytes = 0;       // its gradients, as the buckets count them
  int tensors = 1;        // its parameter tensors
};
// `comm`, if given, receives when the collectives ran, from the start of backward.
double gradient_sync_tail(const std::vector<GradientUnit>& units, double cap_bytes, bool overlap,
                          const std::function<double(double bytes)>& collective_s,
                          std::vector<StreamInterval>* comm = nullptr);

// `bytes` reduced or gathered in pieces of at most `cap_bytes` (0: whole), one after another.
double in_buckets(double bytes, double cap_bytes,
                  const std::function<double(double bytes)>& collective_s);

}  // namespace shardscope::analysis
