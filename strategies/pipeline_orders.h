#pragma once

#include <vector>

#include "strategies/pipeline_schedule.h"

// The multi-stage schedules' per-rank orders (pipeline::schedule dispatches here). Each is
// derived from its paper and from how torch.distributed.pipelining lays it out, so that a run
// here executes the same order PyTorch's would.
namespace shardscope::pipeline::orders {

// Interleaved 1F1B (Narayanan et al., 2021) and its zero-bubble form (Qi et al., 2023, ZB1P):
// micro-batches go through the rank's v stages in rounds of m / max(1, m / p) micro-batches.
std::vector<Action> interleaved(int rank, int ranks, int stages_per_rank, int micro_batches,
                                bool zero_bubble);
// ZB-V (Qi et al., 2023, section 6): two stages per rank in a V.
std::vector<Action> zbv(int rank, int ranks, int micro_batches);
// DualPipeV (DeepSeek-V3's DualPipe folded into a V): two stages per rank, forward and backward
// of different stages paired so that one's compute hides the other's communication.
std::vector<Action> dualpipev(int rank, int ranks, int micro_batches);

}  // namespace shardscope::pipeline::orders
