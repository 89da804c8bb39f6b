#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "engine/train/config.h"

namespace shardscope::perf {

// What the host dispatches in one training step of our GPT (the plain loop of `single`), counted
// with a RecordFunction observer: the top-level ATen operators of the forward (those the model
// calls, not those they call in turn), the autograd nodes of the backward, and the top-level
// operators of the optimizer's step. Views (view, transpose, ...) launch no kernel on a GPU and
// cost the host less; they are counted apart. What the projection prices
// (profiling::block_host_ops() and its kin) is checked against this. Top-level operators count
// on the calling thread only, nodes wherever autograd runs them. One census at a time.
struct OpCensus {
  int64_t forward_ops = 0, forward_views = 0;
  int64_t backward_nodes = 0;
  int64_t optimizer_ops = 0;
  // FLOPs of the forward's top-level matmuls (2 m n k each), from their inputs' shapes.
  double forward_matmul_flops = 0;
  std::map<std::string, int64_t> forward_names, backward_names, optimizer_names;
};

// One step of `config`'s model on its device and precision (its strategy is not used), the
// first step after one uncounted step (the optimizer's state is made in the first).
OpCensus census_of_step(const Config& config);

// Whether ATen operator `name` ("aten::view") only makes a view of its input's storage.
bool is_view_op(const std::string& name);

}  // namespace shardscope::perf
