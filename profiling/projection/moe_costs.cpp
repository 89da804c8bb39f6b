#include "profiling/projection/moe_costs.h"

#include <algorithm>
#include <string>

#include "profiling/projection/priced_pass.h"

namespace shardscope::profiling {

namespace {

using namespace priced;  // NOLINT: this file builds passes

// The router: a Linear without bias, its scores to fp32, softmax, top k, renormalised over the k
// (k > 1: sum, div), and the counts of tokens an expert taken to the host (bincount, to).
HostOps routing_host_ops(const MoeShape& m, bool autocast) {
  const double many = m.top_k > 1 ? 1 : 0;
  HostOps h;
  h.views = 4 + 1 + 1;  // reshape x4 (tokens, choices, weights), view (the output), t (router)
  h.matmuls = 1;
  h.ops = 1 + 1 + 1 + 2 * many + 2;  // to, softmax, topk, [sum, div], bincount, to
  h.casts = autocast ? 2 : 0;        // the router's weight and its input
  // AccumulateGrad, T, Mm, Softmax, Topk, [Div, Sum], and five view nodes in a block (the
  // reshapes of the tokens and of the weights, the output's view).
  h.nodes = 1 + 1 + 1 + 1 + 1 + 2 * many + 5;
  h.node_kernels = 1 + 2 + 3 * many;  // softmax; topk's zeros and scatter; div's three
  h.node_matmuls = 2;
  h.weight_nodes = 2;  // the router weight's AccumulateGrad and T
  h.weight_node_matmuls = 1;
  if (autocast) {
    // Explicit casts with a node each: the scores to fp32 (and the casts above).
    h.nodes += 1 + h.casts;
    h.node_kernels += 1 + h.casts;
    h.weight_nodes += 1, h.weight_node_kernels += 1;  // the weight's cast
  }
  return h;
}

// One expert MLP (two Linears through addmm, a GELU): its weights and biases' nodes.
HostOps expert_host_ops(bool autocast, bool input_cast) {
  HostOps h;
  h.views = 2, h.ops = 2 + 1;                         // t x2; addmm x2, gelu
  h.casts = autocast ? 4 + (input_cast ? 1 : 0) : 0;  // both weights and biases, [the input]
  h.nodes = 4 + 2 + 2 + 1 + h.casts;  // AccumulateGrad x4, T x2, Addmm x2, Gelu, ToCopy
  h.node_kernels = 2 + 1 + h.casts;   // the biases' sums, the GELU's, the casts'
  h.node_matmuls = 4;                 // each Addmm's input and weight gradients
  h.weight_nodes = 4 + 2 + (autocast ? 4 : 0);
  h.weight_node_kernels = 2 + (autocast ? 4 : 0);
  h.weight_node_matmuls = 2;
  return h;
}

}  // namespace

HostOps dense_mlp_host_ops(bool autocast) {
  HostOps h;
  h.views = 2, h.matmuls = 2, h.ops = 2 + 1;  // t x2; matmul x2; add_ x2 (biases), gelu
  h.casts = autocast ? 3 : 0;                 // both weights, and ln2's output
  // AccumulateGrad x4, Mm x2, T x2, Add x2, View x4, UnsafeView x2, Gelu; ToCopy.
  h.nodes = 17 + h.casts;
  h.node_kernels = 2 + 1 + h.casts;
  h.node_matmuls = 4;
  h.weight_nodes = 4 + 2 + 2 + (autocast ? 2 : 0);
  h.weight_node_kernels = 2 + (autocast ? 2 : 0);
  h.weight_node_matmuls = 2;
  return h;
}

HostOps moe_host_ops(const MoeShape& m, bool autocast) {
  HostOps h = routing_host_ops(m, autocast);
  const double e = double(m.local_experts());
  // Under dispatch the rows reach the experts in bf16 already; where they are, each expert's
  // input is cast.
  h += e * expert_host_ops(autocast, !m.dispatched());
  const double explicit_casts = autocast ? 1 : 0;  // a node and a kernel each, when they cast
  if (!m.dispatched()) {
    // sort, bincount, to (the counts to the host), zeros_like; an expert: narrow, div (its
    // picks' tokens), index_select x2 (tokens, weights), unsqueeze, to x2 (the weights to the
    // output's dtype, the weighted output to the sum's), mul, index_add_.
    h.ops += 4 + e * (1 + 2 + 2 + 1 + 1);
    h.views += e * 2;
    // An expert: IndexSelect x2 (zeros, index_add), IndexAdd (index_select), Mul (two), Unsqueeze;
    // the two casts under autocast.
    h.nodes += e * (2 + 1 + 1 + 1 + 2 * explicit_casts);
    h.node_kernels += e * (2 * 2 + 1 + 2 + 2 * explicit_casts);
    return h;
  }
  // sort, div (each pick's token), bincount, to x2 (both counts to the host), index_select x4
  // (outgoing rows, grouped, arrival order, weights), torch::tensor x2 (empty, to) and to x2 (to
  // the device), cat, to (the weights), zeros_like, mul, to, index_add_, and the outgoing rows'
  // cast to bf16 under autocast; a narrow an expert, and the weights' unsqueeze. Two exchanges of
  // rows: a clone each in a group of one, else an empty and an all_to_all, and the counts' own
  // (empty_like, all_to_all).
  h.ops += 1 + 1 + 1 + 2 + 4 + 4 + 2 + 1 + 1 + 1 + 1 + 1 + 1 + explicit_casts;
  h.ops += m.ep > 1 ? 2 * 2 + 2 : 2;
  h.views += e + 1;
  // Slice a local expert (zeros, copy); Cat, IndexSelect x4, IndexAdd, Mul, Unsqueeze, and the
  // two exchanges' backward (an empty and an all_to_all each, or a clone); the outgoing rows'
  // cast, the weights' and the weighted output's under autocast.
  h.nodes += e + 1 + 4 + 1 + 1 + 1 + 2 + 3 * explicit_casts;
  h.node_kernels += e * 2 + 4 * 2 + 1 + 2 + 2 + 3 * explicit_casts;
  return h;
}

PassOps moe_ops(const MoeShape& m, int64_t tokens, int64_t d, int64_t hidden,
                const HardwareProfile& hw, const HardwareProfile& ep_group) {
  PassOps ops;
  const double T = double(tokens), k = double(m.top_k), E = double(m.experts);
  const double e = double(m.local_experts());
  const double routed = T * k;  // rows to the experts: as many arrive at a rank as leave it
  const int64_t rows = std::max<int64_t>(1, int64_t(routed / e + 0.5));  // an expert's
  Pass forward(hw, ep_group, ops.forward), input(hw, ep_group, ops.backward_input),
      weight(hw, ep_group, ops.backward_weight);
  // Memory kernels run forward, and their gradients about as much backward.
  const auto both = [&](const std::string& name, double bytes) {
    forward.memory(name, bytes);
    input.memory(name + " grad", bytes);
  };
  const Linear router{"router", tokens, d, int64_t(E)};
  forward.memory("router casts", T * d * 6 + E * d * 6);
  router.forward(forward);
  router.input_gradient(input);
  router.weight_gradient(weight);
  both("router scores to fp32, softmax", T * E * (6 + 8));
  both("top k", T * E * 4 + T * k * 12);
  if (m.top_k > 1) both("renormalise", T * k * 16);
  forward.memory("expert counts", T * k * 8 * 2);  // bincount, and (local) sort
  if (m.dispatched()) {
    forward.memory("sort, tokens of picks", T * k * 16 * 2);
    both("outgoing rows", routed * d * (8 + 6));  // index_select, cast to bf16
    forward.collective("all_to_all (counts)", "all_to_all", E * 8 * m.ep, m.ep);
    const double exchanged = routed * d * 2;
    forward.collective("all_to_all (rows out)", "all_to_all", exchanged, m.ep);
    forward.collective("all_to_all (rows back)", "all_to_all", exchanged, m.ep);
    input.collective("all_to_all (gradient rows)", "all_to_all", exchanged, m.ep);
    input.collective("all_to_all (gradient rows back)", "all_to_all", exchanged, m.ep);
    if (m.ep <= 1) both("exchange copies", 2 * exchanged * 2);
    both("grouped, cat, arrival order", 3 * routed * d * 4);
  } else {
    both("tokens of each expert", routed * d * (8 + 6));  // index_select, cast to bf16
  }
  for (int64_t i = 0; i < m.local_experts(); ++i) {
    const Linear fc{"expert fc", rows, d, hidden}, proj{"expert proj", rows, hidden, d};
    forward.memory("expert weight casts", 6.0 * (2 * d * hidden + hidden + d));
    fc.forward(forward);
    both("expert gelu", double(rows) * hidden * 4);
    proj.forward(forward);
    for (const Linear* l : {&proj, &fc}) {
      l->input_gradient(input);
      l->weight_gradient(weight);
    }
    weight.memory("expert bias grads", double(rows) * (hidden + d) * 2);
  }
  // Each token's k outputs weighted (weights to bf16, mul), summed into fp32 (to, index_add_).
  forward.memory("zeros", T * d * 4);
  both("weighted sum", routed * (12 + 6) + routed * d * (4 + 6 + 12));
  const HostOps host = moe_host_ops(m, true);
  ops.forward_host_s = forward_host_seconds(host, hw.gpu);
  ops.backward_input_host_s = backward_input_host_seconds(host, hw.gpu);
  ops.backward_weight_host_s = backward_weight_host_seconds(host, hw.gpu);
  return ops;
}

}  // namespace shardscope::profiling
