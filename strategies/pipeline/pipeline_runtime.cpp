#include "strategies/pipeline/pipeline_runtime.h"

#include <exception>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "engine/comm/comm.h"
#include "engine/launch/backward_thread.h"
#include "engine/model/mixed_precision.h"
#include "engine/train/config.h"
#include "profiling/record/host_tracing.h"
#include "profiling/record/memory_tags.h"
#include "profiling/trace/pipeline_pass_names.h"
#include "strategies/pipeline/split_backward.h"
#include "strategies/tensor/tensor_parallel_stage.h"

namespace shardscope {
namespace {

// Tags by the stage a message enters: its input activation, or the gradient of its output.
int activation_tag(int stage) {
  return 2 * stage;
}
int gradient_tag(int stage) {
  return 2 * stage + 1;
}

using Key = std::pair<int, int>;  // (stage, micro-batch)

}  // namespace

PipelineRuntime::PipelineRuntime(Setup setup) : setup_(std::move(setup)) {
  stages_ = pipeline::rank_stages(setup_.kind, setup_.rank, setup_.ranks, setup_.stages_per_rank);
  actions_ = pipeline::schedule(setup_.kind, setup_.rank, setup_.ranks, setup_.micro_batches,
                                setup_.stages_per_rank);
}

bool PipelineRuntime::holds_last_stage() const {
  const int last = setup_.ranks * setup_.stages_per_rank - 1;
  for (int s : stages_) {
    if (s == last) return true;
  }
  return false;
}

// One call of run(): the step's micro-batches in flight, what passes between this rank's own
// stages, and the sends whose buffers must live until they complete.
struct PipelineRuntime::Impl {
  struct InFlight {
    torch::Tensor input;   // received activation (a leaf whose gradient goes back)
    torch::Tensor output;  // the stage's hidden state, or the loss on the last stage
    SplitBackward split;   // between a split backward's two passes
  };

  Impl(const PipelineRuntime& runtime, const std::vector<torch::Tensor>& inputs,
       const std::vector<torch::Tensor>& targets, double loss_scale, bool last_micro,
       const Hooks& hooks)
      : rt(runtime),
        inputs(inputs),
        targets(targets),
        loss_scale(loss_scale),
        last_micro(last_micro),
        hooks(hooks),
        p(runtime.setup_.ranks),
        v(runtime.setup_.stages_per_rank),
        m(runtime.setup_.micro_batches),
        last_stage(p * v - 1),
        activation_options(
            torch::TensorOptions().dtype(torch::kFloat).device(inputs.front().device())) {
    for (size_t c = 0; c < rt.stages_.size(); ++c) chunk_of[rt.stages_[c]] = c;
    last_gradient_pass.assign(rt.stages_.size(), 0);
    for (size_t k = 0; k < rt.actions_.size(); ++k) {
      if (rt.actions_[k].pass != pipeline::Pass::kForward && finishes_gradients(rt.actions_[k])) {
        last_gradient_pass[chunk_of[rt.actions_[k].stage]] = k;
      }
    }
  }

  // A stage with no received input (the first) has no input gradient to split off: its input
  // pass is its whole backward and its weight pass has nothing left to do.
  static bool finishes_gradients(const pipeline::Action& a) {
    return a.pass == pipeline::Pass::kBackward ||
           (a.pass == pipeline::Pass::kWeight) == (a.stage > 0);
  }
  bool local(int stage) const { return chunk_of.count(stage) > 0; }
  int peer(int stage) const { return pipeline::stage_rank(rt.setup_.kind, stage, p, v); }
  std::string label(std::string_view pass, const pipeline::Action& a) const {
    return std::string(pass) + " " + std::to_string(a.micro) +
           (v > 1 ? " stage " + std::to_string(a.stage) : std::string());
  }

  torch::Tensor received(const Key& key, std::map<Key, torch::Tensor>& handed, int from, int tag) {
    if (local(from)) {
      auto node = handed.extract(key);
      return node.mapped();
    }
    const auto chunk = rt.setup_.chunks[chunk_of[key.first]];
    const std::vector<int64_t> shape = chunk->hidden_shape(inputs[key.second].size(0));
    if (chunk->hidden_replicated()) {
      // The same tensor rank of the other stage sent its piece; this stage's group gathers them.
      const int64_t elements = c10::multiply_integers(shape);
      torch::Tensor piece = torch::empty({elements / chunk->tensor_ranks()}, activation_options);
      rt.setup_.comm->recv(piece, peer(from), tag);
      return chunk->gather_hidden(piece, shape);
    }
    torch::Tensor t = torch::empty(shape, activation_options);
    rt.setup_.comm->recv(t, peer(from), tag);
    return t;
  }

  void forward(const pipeline::Action& a, TensorParallelStage& chunk) {
    const Key key{a.stage, a.micro};
    torch::Tensor input = inputs[a.micro];
    if (a.stage > 0) {
      // Received, then saved for backward: an activation of this stage.
      input = received(key, handed_activations, a.stage - 1, activation_tag(a.stage));
      input.requires_grad_(true);
    }
    InFlight& slot = in_flight[key];
    profiling::ScopedSpan span(profiling::Category::kForward,
                               label(profiling::kForwardPassSpan, a));
    slot.input = input;
    {
      std::optional<ComputePrecisionScope> precision;
      if (rt.setup_.options) precision.emplace(*rt.setup_.options, inputs[a.micro].device().type());
      slot.output = chunk.forward(input, targets[a.micro]);
    }
    if (a.stage == last_stage) {
      loss_sum += slot.output.detach().item<double>();
      return;
    }
    profiling::MemoryTag tag(profiling::MemoryKind::kCommBuffers);
    auto buffer = slot.output.detach().to(torch::kFloat).contiguous();
    if (local(a.stage + 1)) {
      handed_activations[{a.stage + 1, a.micro}] = buffer;
    } else {
      if (chunk.hidden_replicated()) buffer = chunk.hidden_piece(buffer);
      activation_sends[key] = {
          rt.setup_.comm->send_async(buffer, peer(a.stage + 1), activation_tag(a.stage + 1)),
          buffer};
    }
  }

  void weight_pass(const pipeline::Action& a, size_t c, size_t k) {
    const Key key{a.stage, a.micro};
    {
      profiling::ScopedSpan span(profiling::Category::kBackward,
                                 label(profiling::kWeightPassSpan, a));
      in_flight.at(key).split.weight_pass();
    }
    if (hooks.after_weight_pass) hooks.after_weight_pass(c, k == last_gradient_pass[c]);
    in_flight.erase(key);  // this micro-batch's activations are freed
  }

  // A whole backward, or a split backward's input pass; sends the input's gradient on.
  void backward(const pipeline::Action& a, TensorParallelStage& chunk) {
    const Key key{a.stage, a.micro};
    InFlight& slot = in_flight.at(key);
    torch::Tensor grad;
    if (a.stage < last_stage) {
      profiling::MemoryTag tag(profiling::MemoryKind::kCommBuffers);
      grad = received(key, handed_gradients, a.stage + 1, gradient_tag(a.stage));
      if (auto sent = activation_sends.find(key); sent != activation_sends.end()) {
        sent->second.first.wait();
        activation_sends.erase(sent);
      }
    }
    const double scale = loss_scale / m;
    const torch::Tensor output_grad =
        a.stage == last_stage ? torch::full_like(slot.output, scale) : grad.to(slot.output.dtype());
    torch::Tensor input_grad;
    if (a.pass == pipeline::Pass::kBackward || a.stage == 0) {
      profiling::ScopedSpan span(profiling::Category::kBackward,
                                 label(profiling::kBackwardPassSpan, a));
      run_backward_pass([&] { slot.output.backward(output_grad); });
      if (a.stage > 0) input_grad = slot.input.grad();
      if (hooks.after_backward) hooks.after_backward();
    } else {
      profiling::ScopedSpan span(profiling::Category::kBackward,
                                 label(profiling::kInputPassSpan, a));
      input_grad = slot.split.input_pass(slot.output, output_grad, slot.input, chunk.trainable());
    }
    for (const auto& param : chunk.trainable()) {
      profiling::tag_memory(param.grad(), profiling::MemoryKind::kGradients);
    }
    if (a.stage > 0) send_input_gradient(a, chunk, input_grad);
    if (a.pass == pipeline::Pass::kBackward || a.stage == 0) in_flight.erase(key);
  }

  void send_input_gradient(const pipeline::Action& a, const TensorParallelStage& chunk,
                           const torch::Tensor& input_grad) {
    auto buffer = input_grad.contiguous();
    profiling::tag_memory(buffer, profiling::MemoryKind::kCommBuffers);
    if (local(a.stage - 1)) {
      handed_gradients[{a.stage - 1, a.micro}] = buffer;
      return;
    }
    if (chunk.hidden_replicated()) buffer = chunk.hidden_piece(buffer);
    if (v == 1 && !gradient_sends.empty()) {
      gradient_sends.back().first.wait();
      gradient_sends.clear();
    }
    gradient_sends.emplace_back(
        rt.setup_.comm->send_async(buffer, peer(a.stage - 1), gradient_tag(a.stage - 1)), buffer);
  }

  const PipelineRuntime& rt;
  const std::vector<torch::Tensor>& inputs;
  const std::vector<torch::Tensor>& targets;
  const double loss_scale;
  const bool last_micro;
  const Hooks& hooks;
  const int p, v, m, last_stage;
  const torch::TensorOptions activation_options;
  std::map<int, size_t> chunk_of;
  std::vector<size_t> last_gradient_pass;
  std::map<Key, InFlight> in_flight;
  std::map<Key, torch::Tensor> handed_activations, handed_gradients;  // between local stages
  // A send's buffer lives until the send completes. An activation's send has completed once its
  // gradient came back. With one stage per rank a gradient's send is waited for before the
  // next, by when the previous stage has long posted its receive, so buffers do not pile up
  // with m; with several, a rank may block on a receive its neighbour posts only after sending
  // to it, so those sends are waited for at the end of the step.
  std::map<Key, std::pair<CommWork, torch::Tensor>> activation_sends;
  std::vector<std::pair<CommWork, torch::Tensor>> gradient_sends;
  double loss_sum = 0.0;
};

double PipelineRuntime::run(const std::vector<torch::Tensor>& inputs,
                            const std::vector<torch::Tensor>& targets, double loss_scale,
                            bool last_micro, const Hooks& hooks) {
  Impl step(*this, inputs, targets, loss_scale, last_micro, hooks);
  // Every micro-batch of the step computes with one bf16 copy of each weight, made by its first
  // forward; a stage with k micro-batches in flight would otherwise save k of them. The copies
  // last over the step's accumulation passes (the weights change only after the last), as
  // Megatron's bf16 weights do, and go with the last pass, or with a pass that fails.
  struct SharedCasts {
    const std::vector<TensorParallelStage*>& chunks;
    bool last_pass;
    SharedCasts(const std::vector<TensorParallelStage*>& c, bool on, bool last)
        : chunks(c), last_pass(last) {
      for (auto* chunk : chunks) chunk->share_weight_casts(on);
    }
    ~SharedCasts() {
      if (!last_pass && std::uncaught_exceptions() == 0) return;
      for (auto* chunk : chunks) chunk->share_weight_casts(false);
    }
  } shared(setup_.chunks, setup_.options && shares_weight_casts(*setup_.options), last_micro);
  for (size_t k = 0; k < actions_.size(); ++k) {
    const pipeline::Action& a = actions_[k];
    const size_t c = step.chunk_of.at(a.stage);
    TensorParallelStage& chunk = *setup_.chunks[c];
    if (a.pass == pipeline::Pass::kForward) {
      step.forward(a, chunk);
      continue;
    }
    if (a.pass == pipeline::Pass::kWeight && a.stage == 0) continue;  // done in its input pass
    if (last_micro && k == step.last_gradient_pass[c] && hooks.before_last_gradients) {
      hooks.before_last_gradients(c, step.in_flight.at({a.stage, a.micro}).output);
    }
    if (a.pass == pipeline::Pass::kWeight) {
      step.weight_pass(a, c, k);
    } else {
      step.backward(a, chunk);
    }
  }
  for (auto& [work, buffer] : step.gradient_sends) work.wait();
  return step.loss_sum;
}

}  // namespace shardscope
