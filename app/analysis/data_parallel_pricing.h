#pragma once

#include <string>
#include <vector>

#include "app/analysis/data_parallel_step.h"
#include "engine/train/config.h"
#include "profiling/projection/hardware_profile.h"

namespace shardscope::analysis {

// The data-parallel group's communication in a projected step, as each strategy sends it
// (its traits' GradientSync and ZeRO stage), on the two streams of data_parallel_step.h. Bytes
// of a parameter and its gradient: `param_bytes` (4: our strategies keep fp32 weights under bf16
// compute); of a reduced gradient: `reduce_bytes`. `ranks` average over `group`'s links.

// What one micro-batch's forward and backward of each group of parameters cost: the
// embeddings, one block, the head.
struct GroupCompute {
  double embedding_forward = 0, embedding_backward = 0, block_forward = 0, block_backward = 0,
         head_forward = 0, head_backward = 0;
};

// What a projected step's timeline draws of the data-parallel communication.
struct DataParallelTimeline {
  bool units = false;  // ZeRO-3: `pass` holds each micro-batch's two streams
  StreamTimeline pass;
  // Replicated strategies: the buckets' collectives in the last micro-batch, from the start of
  // its backward; what of them runs past backward; then, after the optimizer, the stepped
  // parameters sent to every rank.
  std::vector<StreamInterval> sync;
  double tail_s = 0, after_step_s = 0;
  std::string sync_op = "all_reduce", after_step_op;        // the collectives' names
  std::string tail_name;                                    // what runs past backward, in words
  std::string what = "gradient all_reduce after backward";  // the exposed part, in words
};

// ZeRO-3's parameter gathers and gradient reduce-scatters in one micro-batch, unit by unit as
// it runs them (the embeddings, each block, the head) beside the compute: what of them the
// compute does not hide. `timeline`, if given, receives the micro-batch's two streams.
double zero3_exposed_seconds(const Config& config, double param_bytes, const GroupCompute& c,
                             double reduce_bytes, int ranks,
                             const profiling::HardwareProfile& group,
                             DataParallelTimeline* timeline = nullptr);

// What brings every rank the `held` parameters that the strategy named `sync` stepped on their
// owners only: ZeRO-1's broadcast from each owner, ZeRO-2's all-gather of each bucket; 0 for a
// strategy whose ranks each step all of them.
// `buckets`: the bytes of each of its buckets (ZeRO-2 all-gathers bucket by bucket; none: one
// all-gather of everything).
double after_step_seconds(const std::string& sync, double held, double param_bytes,
                          const std::vector<double>& buckets, int ranks,
                          const profiling::HardwareProfile& group);

// A replicated data-parallel strategy's gradient sync in the step's last micro-batch (the others
// accumulate): bucket by bucket beside its backward, or after it, as its traits say; what runs
// past the end of backward, then what follows its optimizer's step; `timeline` receives when
// each ran, and says what in words.
double replicated_sync_seconds(const Config& config, double param_bytes, const GroupCompute& c,
                               double held, double reduce_bytes, int ranks,
                               const profiling::HardwareProfile& group,
                               DataParallelTimeline* timeline);

// What the projection's layout says of a step's data-parallel group: the ranks that average
// gradients, the tensor and expert degrees beside them, the micro-batches, whether parameters are
// sharded too (ZeRO-3), and the parameters a GPU holds (of them, its experts').
struct DataParallelShape {
  int ranks = 1, tp = 1, ep = 0, micro_batches = 1;
  bool zero3 = false;
  double param_bytes = 4, held = 0, experts = 0;
};
// The group's communication in a step, as the strategy sends it: what the compute does not hide,
// in seconds and in words; and, for a data-parallel strategy or one device, the timeline its
// step is drawn from (`drawn`). A model-parallel layout's data-parallel dimension, a context or
// an expert group: one all-reduce after backward.
struct DataParallelComm {
  double seconds = 0;
  std::string what = "gradient all_reduce after backward";
  bool drawn = false;
  DataParallelTimeline timeline;
};
DataParallelComm data_parallel_comm(const Config& config, const DataParallelShape& shape,
                                    const GroupCompute& c, const profiling::HardwareProfile& hw);

}  // namespace shardscope::analysis
