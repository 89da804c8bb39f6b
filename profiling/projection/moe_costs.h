#pragma once

#include <cstdint>

#include "profiling/projection/hardware_profile.h"
#include "profiling/projection/transformer_costs.h"

namespace shardscope::profiling {

// A mixture of experts in place of a block's MLP (engine/model's MoeImpl): a router (a Linear
// without bias, in fp32 after it) picks each token's top k of E experts, each an MLP of the dense
// one's width. Its experts run either where the tokens are (MoeImpl::local_experts: the
// data-parallel strategies, cp) or, under expert parallelism (`ep`, any degree), on the rank
// that holds them, reached by all_to_all (strategies/expert/expert_dispatch.cpp).
struct MoeShape {
  int64_t experts = 0, top_k = 0;
  int ep = 0;  // ranks the experts are spread over by dispatch; 0: they run where the tokens are
  bool dispatched() const { return ep > 0; }
  int64_t local_experts() const { return dispatched() ? experts / ep : experts; }
};

// What the host dispatches for one MoE layer in a block, counted from a run of it
// (MoeCosts.HostOperatorsAreWhatTheLayerDispatches, and ProjectionCheck for a whole model's
// step): its top-level operators (views and matmuls apart; autocast's casts inside them), and
// its backward's autograd nodes with the kernels and matmuls they launch.
HostOps moe_host_ops(const MoeShape& moe, bool autocast);
// The dense MLP's share of block_host_ops: what a MoE layer stands in place of.
HostOps dense_mlp_host_ops(bool autocast);

// A MoE layer's kernels for `tokens` tokens on one rank, bf16 autocast: forward, backward on the
// input's side and on the weights' (the routed rows assumed spread evenly over the experts, as a
// trained router spreads them), and under expert parallelism its all_to_all over `ep_group`.
// Routing waits on the device twice or three times a layer (the token counts go to the host);
// a pass is priced as its kernels or its host's dispatch, whichever is longer, so those waits,
// which cost a dispatch's latency where kernels are long, are not counted.
PassOps moe_ops(const MoeShape& moe, int64_t tokens, int64_t d_model, int64_t hidden,
                const HardwareProfile& hw, const HardwareProfile& ep_group);

}  // namespace shardscope::profiling
