#pragma once

#include <string>
#include <vector>

#include "app/analysis/data_parallel_step.h"
#include "engine/train/config.h"
#include "profiling/projection/hardware_profile.h"
#include "profiling/projection/transformer_costs.h"

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
  // Of each group's passes, forward and backward, the share of their time the GPU runs
  // kernels: below 1 where the host's dispatch is the longer (SharedGpuStreams::compute's `busy`).
  struct Busy {
    profiling::KernelShare embedding, block, head;
  } busy;
};

// What a projected step's timeline draws of the data-parallel communication.
struct DataParallelTimeline {
  bool units = false;  // ZeRO-3: `pass` holds each micro-batch's two streams
  StreamTimeline pass;
  // Replicated strategies: the last micro-batch's backward and the buckets' collectives beside it,
  // from its start; what of them runs past backward; then, after the optimizer, the stepped
  // parameters sent to every rank.
  StreamTimeline sync;
  double tail_s = 0, after_step_s = 0;
  std::string sync_op = "all_reduce", after_step_op;  // the collectives' names
  std::string tail_name;                              // what runs past backward, in words
  std::string what;                                   // the exposed part, in words
};

// What the projection's layout says of a step's data-parallel group: the ranks that average
// gradients, the tensor and expert degrees beside them, the micro-batches, and the parameters a
// GPU holds (of them, its experts').
struct DataParallelShape {
  int ranks = 1, tp = 1, ep = 0, micro_batches = 1;
  double param_bytes = 4, held = 0, experts = 0;
};
// The group's communication in a step, as the strategy sends it: what the compute does not hide,
// in seconds and in words; and, for a data-parallel strategy or one device, the timeline its
// step is drawn from (`drawn`). A model-parallel layout's data-parallel dimension, a context or
// an expert group: one all-reduce after backward.
struct DataParallelComm {
  double seconds = 0;
  double compute_slowed_s = 0;  // of `seconds`: the compute running slower beside the collectives
  std::string what = "gradient all_reduce after backward";
  bool drawn = false;
  DataParallelTimeline timeline;
};
DataParallelComm data_parallel_comm(const Config& config, const DataParallelShape& shape,
                                    const GroupCompute& c, const profiling::HardwareProfile& hw);

}  // namespace shardscope::analysis
