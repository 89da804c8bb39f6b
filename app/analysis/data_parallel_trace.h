#pragma once

#include <string>

#include "app/analysis/data_parallel_pricing.h"
#include "profiling/trace/trace.h"

namespace shardscope::analysis {

// A projected data-parallel step as its one drawn rank runs it (rank 0 of the trace): each
// micro-batch's forward and then its backward (ZeRO-3: unit by unit, waiting where a gather is
// late), the collectives on the comm lane beside them, what runs past the last backward, the
// optimizer, and what follows it. Every replica does the same.
struct DataParallelStep {
  int micro_batches = 1, ranks = 1;
  double forward_s = 0, backward_s = 0;  // one micro-batch's
  double weight_casts_s = 0;             // the step's bf16 weight copies, in the first forward
  double optimizer_s = 0;
};
// A span of `rank` in a projected step (step 0), in seconds from its start.
profiling::Event& add_projected_span(profiling::Trace& trace, int rank, const std::string& name,
                                     profiling::Category category, double t0, double t1, int micro);

void add_data_parallel_step(profiling::Trace& trace, const DataParallelStep& step,
                            const DataParallelTimeline& timeline);

}  // namespace shardscope::analysis
