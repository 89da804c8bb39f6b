#pragma once

#include <cstdint>
#include <vector>

#include "profiling/projection/hardware_profile.h"
#include "profiling/projection/transformer_costs.h"

namespace shardscope::profiling {

// Context parallelism's ring attention (strategies/context/ring_attention.cpp) on one of its
// `ranks` ring ranks, op by op as that code runs them: each rank holds two of a sequence's 2c
// chunks of L = s / 2c tokens, and over c ring steps attends its queries to the 2c + 1 chunk pairs
// that causality leaves (two on the diagonal, masked), in fp32 outside autocast, merging the
// pairs of a query chunk by online softmax; backward runs the pairs again with each block's key
// and value gradients travelling behind it. Each ring step's transfer (the next block, and in
// backward its gradients) runs under that step's compute: what is left of it is a kTensorComm op
// ("ring wait"), which a replayed trace leaves to its recorded sends.
struct RingAttentionOps {
  std::vector<PricedOp> forward, backward;
  double forward_host_s = 0, backward_host_s = 0;
  // What the host dispatches: top-level operators, views and matmuls (the census test holds
  // these to a run of the ring), and the operators that composite ones dispatch in turn.
  struct Count {
    int ops = 0, views = 0, matmuls = 0, inner_ops = 0;
  } forward_count, backward_count;
};

// `batch_heads`: sequences x heads on this rank (heads / tp under tensor parallelism); `seq`: the
// whole sequence; `ring`: the profile the ring's neighbours talk over. Needs the GPU's fp32 rate.
RingAttentionOps ring_attention_ops(const HardwareProfile& hw, const HardwareProfile& ring,
                                    int64_t batch_heads, int64_t seq, int64_t head_dim, int ranks);

// The chunk pairs rank `rank` of `ranks` attends at ring step `step` (the block in hand is rank
// (rank - step)'s), and how many of them are on the causal diagonal.
struct RingStepPairs {
  int pairs = 0, diagonal = 0, merged = 0;
};
std::vector<RingStepPairs> ring_step_pairs(int rank, int ranks);

}  // namespace shardscope::profiling
