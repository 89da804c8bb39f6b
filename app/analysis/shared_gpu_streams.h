#pragma once

#include <vector>

namespace shardscope::analysis {

// Two streams of one GPU, one computing and one running collectives one after another, as a
// data-parallel step runs them. They share the GPU's SMs and memory bandwidth: a GPU's profile
// measured that a GEMM and a kernel taking NCCL's share beside it hide only part of the shorter
// of the two (`collective_hidden_beside_gemm`, h). So while both streams run, each runs at
// 1 / (2 - h) of its speed alone: a pair started together then takes the longer plus (1 - h) of
// the shorter, as measured; h 1 is two streams that do not slow each other, h 0 one stream.

// How the two streams share the GPU: `hidden_share` h as above; `compute_busy`, the share of
// the compute's time that the GPU runs its kernels (below 1 where the host's dispatch is the
// longer: the kernels then wait for it). The two contend only while the kernels run: the compute
// keeps its pace while its kernels, slowed, still keep up with the host, and the collective is
// slowed in proportion (1 - compute_busy (1 - 1 / (2 - h))). The measured pairs were GEMMs back
// to back, compute_busy 1.
struct GpuSharing {
  double hidden_share = 1;
  double compute_busy = 1;
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

// The tasks of both streams, in the order each stream runs them. A compute task starts when the
// one before it has ended and the collective it waits for (if any) is done; a collective is
// issued as a compute task starts or ends (or at the start) and runs once the collective issued
// before it is done.
class SharedGpuStreams {
 public:
  // A compute task of `seconds` (0: a point where the compute stream waits for `after`, a
  // collective's index, and nothing more). Returns its index.
  int compute(double seconds, StreamInterval::Kind kind, int after = -1);
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
  };
  std::vector<Task> compute_, comm_;
};

}  // namespace shardscope::analysis
