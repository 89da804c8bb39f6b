#pragma once

#include <vector>

namespace shardscope::analysis {

// Two streams of one GPU, one computing and one running collectives one after another, as a
// data-parallel step runs them. They share the GPU's SMs and memory bandwidth, so while both
// run each goes at its own measured pace (GpuCompute::Contention: an H100's GEMMs at 0.81 of
// their speed beside a kernel taking NCCL's share, that kernel at 0.56 beside them), and alone
// at full speed. A pair started together then takes what the GPU measured such pairs take.

// How the two streams share the GPU: each one's pace while the other runs (1, 1: neither slows
// the other). A compute task says how much of its time its kernels fill, `busy` (below 1 where
// the host's dispatch is the longer: the kernels then wait for it), and the two contend only
// while kernels run: slowed kernels keep the host's pace while they still fit in its time
// (compute at min(1, compute_rate / busy)), and the collective is slowed over the share of the
// time the slowed kernels fill, min(1, busy / compute_rate). The measured pairs were GEMMs back
// to back, busy 1.
struct GpuSharing {
  double compute_rate = 1, collective_rate = 1;
};

// What a stream was busy with, and when (seconds from the start). Back-to-back intervals of one
// kind that nothing slowed are one interval: a timeline draws them, not each task. `alone_s`:
// what its work would have taken with the GPU to itself (the rest of the interval is the
// slowdown).
struct StreamInterval {
  enum Kind { kForward, kBackward, kGather, kReduce } kind = kForward;
  double start = 0, end = 0;
  double alone_s = 0;
};
struct StreamTimeline {
  std::vector<StreamInterval> compute, comm;
};

// How much longer the intervals took than their work alone: the slowdown.
double slowed_seconds(const std::vector<StreamInterval>& intervals);

// The tasks of both streams, in the order each stream runs them. A compute task starts when the
// one before it has ended and the collective it waits for (if any) is done; a collective is
// issued as a compute task starts or ends (or at the start) and runs once the collective issued
// before it is done.
class SharedGpuStreams {
 public:
  // A compute task of `seconds` (0: a point where the compute stream waits for `after`, a
  // collective's index, and nothing more), whose kernels fill `busy` of its time, 0 to 1.
  // Returns its index.
  int compute(double seconds, StreamInterval::Kind kind, int after = -1, double busy = 1);
  // A collective of `seconds` issued as compute task `by` starts (or ends: `at_end`); `by` -1:
  // at the start. Returns its index, or -1 when it moves nothing (0 s: nothing waits for it).
  int collective(double seconds, StreamInterval::Kind kind, int by = -1, bool at_end = false);

  struct Result {
    double compute_end = 0, comm_end = 0;  // when each stream finished its last task
    double compute_alone_s = 0;            // the compute tasks' seconds alone on the GPU
  };
  // Runs both streams sharing the GPU as `sharing` says; `timeline`, if given, receives them.
  Result run(const GpuSharing& sharing, StreamTimeline* timeline = nullptr) const;

 private:
  struct Task {
    double seconds = 0;
    StreamInterval::Kind kind = StreamInterval::kForward;
    int link = -1;  // compute: the collective it waits for; collective: the task issuing it
    bool at_end = false;
    double busy = 1;  // compute: the share of its time its kernels fill
  };
  std::vector<Task> compute_, comm_;
};

}  // namespace shardscope::analysis
