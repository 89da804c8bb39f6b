#include "strategies/pipeline/split_backward.h"

#include <deque>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "engine/launch/backward_thread.h"

namespace shardscope {

using torch::autograd::Edge;
using torch::autograd::Node;
using torch::autograd::variable_list;

namespace {

// What a node received in the input pass; captured once, then the hook stands aside.
struct Received {
  variable_list grads;
  bool capturing = true;
};

class CaptureGradients final : public torch::autograd::FunctionPreHook {
 public:
  explicit CaptureGradients(std::shared_ptr<Received> into) : into_(std::move(into)) {}
  variable_list operator()(const variable_list& grads) override {
    if (into_->capturing) into_->grads = grads;
    return grads;
  }

 private:
  std::shared_ptr<Received> into_;
};

// Nodes reachable from `start` walking edges backwards (towards the output), `start` included.
// Stops at (and reports) the nodes in `stop_at`.
std::unordered_set<Node*> walk_up(Node* start,
                                  const std::unordered_map<Node*, std::vector<Node*>>& parents,
                                  const std::unordered_set<Node*>& stop_at,
                                  std::vector<Node*>* stopped) {
  std::unordered_set<Node*> seen{start};
  std::deque<Node*> queue{start};
  while (!queue.empty()) {
    Node* node = queue.front();
    queue.pop_front();
    const auto it = parents.find(node);
    if (it == parents.end()) continue;
    for (Node* parent : it->second) {
      if (!seen.insert(parent).second) continue;
      if (stop_at.count(parent)) {
        stopped->push_back(parent);
        continue;
      }
      queue.push_back(parent);
    }
  }
  return seen;
}

}  // namespace

// Weights whose paths meet the input's path at shared nodes are computed together.
struct SplitBackward::Group {
  std::vector<std::shared_ptr<Node>> meeting_nodes;
  std::vector<std::shared_ptr<Received>> received;
  std::vector<torch::Tensor> weights;
  torch::autograd::edge_list weight_edges;
};

torch::Tensor SplitBackward::input_pass(const torch::Tensor& output,
                                        const torch::Tensor& output_grad,
                                        const torch::Tensor& input,
                                        const std::vector<torch::Tensor>& weights) {
  groups_.clear();
  // The graph from the output down, with each node's parents (the nodes that feed it gradient).
  std::unordered_map<Node*, std::vector<Node*>> parents;
  std::unordered_map<Node*, std::shared_ptr<Node>> owned;
  const auto root = torch::autograd::impl::gradient_edge(output).function;
  std::deque<Node*> queue{root.get()};
  owned[root.get()] = root;
  while (!queue.empty()) {
    Node* node = queue.front();
    queue.pop_front();
    for (const Edge& edge : node->next_edges()) {
      if (!edge.function) continue;
      if (owned.emplace(edge.function.get(), edge.function).second) {
        queue.push_back(edge.function.get());
      }
      parents[edge.function.get()].push_back(node);
    }
  }
  const auto input_node = torch::autograd::impl::gradient_edge(input).function;
  const std::unordered_set<Node*> input_path = walk_up(input_node.get(), parents, {}, nullptr);

  // Each weight's meeting nodes; weights sharing one are joined (union-find over weights).
  std::vector<std::vector<Node*>> meets(weights.size());
  std::vector<size_t> leader(weights.size());
  std::iota(leader.begin(), leader.end(), 0);
  auto find = [&](size_t i) {
    while (leader[i] != i) i = leader[i] = leader[leader[i]];
    return i;
  };
  std::unordered_map<Node*, size_t> first_weight_at;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!weights[i].requires_grad()) continue;
    const auto node = torch::autograd::impl::gradient_edge(weights[i]).function;
    if (!owned.count(node.get())) continue;  // not used by this stage's output
    walk_up(node.get(), parents, input_path, &meets[i]);
    for (Node* meet : meets[i]) {
      const auto [it, fresh] = first_weight_at.emplace(meet, i);
      if (!fresh) leader[find(i)] = find(it->second);
    }
  }
  std::unordered_map<size_t, std::shared_ptr<Group>> by_leader;
  std::unordered_map<Node*, std::shared_ptr<Received>> capture;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (meets[i].empty()) continue;
    auto& group = by_leader[find(i)];
    if (!group) {
      group = std::make_shared<Group>();
      groups_.push_back(group);
    }
    group->weights.push_back(weights[i]);
    group->weight_edges.push_back(torch::autograd::impl::gradient_edge(weights[i]));
    for (Node* meet : meets[i]) {
      if (capture.count(meet)) continue;
      auto received = std::make_shared<Received>();
      capture[meet] = received;
      owned[meet]->add_pre_hook(std::make_unique<CaptureGradients>(received));
      group->meeting_nodes.push_back(owned[meet]);
      group->received.push_back(received);
    }
  }
  torch::autograd::variable_list grads;
  run_backward_pass([&] {
    grads = torch::autograd::grad({output}, {input}, {output_grad}, /*retain_graph=*/true,
                                  /*create_graph=*/false, /*allow_unused=*/true);
  });
  for (auto& [node, received] : capture) received->capturing = false;
  return grads[0];
}

void SplitBackward::weight_pass() {
  auto& engine = torch::autograd::Engine::get_default_engine();
  for (const auto& group : groups_) {
    torch::autograd::edge_list roots;
    variable_list root_grads;
    for (size_t k = 0; k < group->meeting_nodes.size(); ++k) {
      const variable_list& grads = group->received[k]->grads;
      for (size_t j = 0; j < grads.size(); ++j) {
        if (!grads[j].defined()) continue;
        roots.emplace_back(group->meeting_nodes[k], static_cast<uint32_t>(j));
        root_grads.push_back(grads[j]);
      }
    }
    if (roots.empty()) continue;
    // Only the paths from the meeting nodes to this group's weights run; their gradients are
    // returned, not accumulated, so add them the way AccumulateGrad would.
    const variable_list dweights =
        engine.execute(roots, root_grads, /*keep_graph=*/true, /*create_graph=*/false,
                       /*accumulate_grad=*/false, group->weight_edges);
    for (size_t k = 0; k < group->weights.size(); ++k) {
      if (!dweights[k].defined()) continue;
      torch::Tensor weight = group->weights[k];
      if (weight.grad().defined()) {
        weight.mutable_grad().add_(dweights[k]);
      } else {
        weight.mutable_grad() = dweights[k];
      }
    }
  }
  groups_.clear();
}

}  // namespace shardscope
