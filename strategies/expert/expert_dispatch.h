#pragma once

#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "engine/model/gpt_model.h"

namespace shardscope {

class Comm;

// Expert parallelism's routing (used by the `ep` strategy): E experts spread over the e ranks of
// an expert-parallel group, E/e each and in order (rank j holds experts [j E/e, (j+1) E/e)).
// Each rank routes its own tokens; the tokens travel to their experts' ranks and the outputs
// travel back, each by one all_to_all with uneven splits (dispatch and combine), as in
// Megatron-Core's and DeepSpeed-MoE's token dispatchers. Nothing is dropped (dropless).
namespace ep {

struct Placement {
  Comm* comm = nullptr;  // the expert-parallel group; null: a group of one
  int rank = 0;          // this rank's place in it
  int ranks = 1;
  int experts = 0;  // E, the whole model's experts per layer
  int per_rank() const { return experts / ranks; }
  int owner(int expert) const { return expert / per_rank(); }
};

// All-to-all of rows, differentiable: input_rows[j] rows go to rank j and output_rows[i] rows
// come from rank i; backward sends the gradients' rows back the way the rows came.
torch::Tensor all_to_all_rows(const torch::Tensor& x, Comm* comm,
                              const std::vector<int64_t>& output_rows,
                              const std::vector<int64_t>& input_rows);

// The weighted sum of each token's chosen experts' outputs (MoeImpl's ExpertsFn): `tokens` [N, d],
// `chosen` [N, k] expert indices in [0, E), `weights` [N, k]; `local` are this rank's experts.
// Under autocast the tokens travel in the compute dtype, as the experts' first matmul would read
// them anyway (the same values, half the bytes).
torch::Tensor dispatch_to_experts(const torch::Tensor& tokens, const torch::Tensor& chosen,
                                  const torch::Tensor& weights, const std::vector<Mlp>& local,
                                  const Placement& placement);

}  // namespace ep
}  // namespace shardscope
