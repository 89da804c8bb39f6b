#include "engine/model/activation_checkpoint.h"

#include <ATen/autocast_mode.h>
#include <torch/autograd.h>
#include <torch/custom_class.h>

namespace shardscope {
namespace {

// What backward needs besides the saved input, kept alive by the autograd graph.
struct Recipe : torch::CustomClassHolder {
  TensorFunction fn;
  bool autocast = false;
  at::ScalarType autocast_dtype = at::kBFloat16;
};

thread_local int recomputing = 0;

// The forward's precision and the "recomputing" mark for a recomputation's scope, set back as
// they were when it ends, also when it throws.
class RecomputeScope {
 public:
  RecomputeScope(c10::DeviceType device, const Recipe& recipe)
      : device_(device),
        was_enabled_(at::autocast::is_autocast_enabled(device)),
        was_dtype_(at::autocast::get_autocast_dtype(device)) {
    at::autocast::set_autocast_enabled(device, recipe.autocast);
    at::autocast::set_autocast_dtype(device, recipe.autocast_dtype);
    ++recomputing;
  }
  ~RecomputeScope() {
    --recomputing;
    at::autocast::set_autocast_enabled(device_, was_enabled_);
    at::autocast::set_autocast_dtype(device_, was_dtype_);
  }
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;

 private:
  c10::DeviceType device_;
  bool was_enabled_;
  at::ScalarType was_dtype_;
};

struct Recompute : torch::autograd::Function<Recompute> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               c10::intrusive_ptr<Recipe> recipe) {
    ctx->save_for_backward({x});
    ctx->saved_data["recipe"] = at::IValue::make_capsule(recipe);
    torch::NoGradGuard no_grad;
    return recipe->fn(x);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto recipe = c10::static_intrusive_pointer_cast<Recipe>(ctx->saved_data["recipe"].toCapsule());
    const torch::Tensor saved = ctx->get_saved_variables()[0];
    torch::Tensor input = saved.detach().set_requires_grad(saved.requires_grad());
    torch::Tensor output;
    {
      torch::AutoGradMode grad_mode(true);
      const RecomputeScope scope(input.device().type(), *recipe);
      output = recipe->fn(input);
    }
    torch::autograd::backward({output}, {grads[0]});
    return {input.requires_grad() ? input.grad() : torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool recomputing_in_backward() {
  return recomputing > 0;
}

torch::Tensor recompute_in_backward(TensorFunction fn, const torch::Tensor& x) {
  auto recipe = c10::make_intrusive<Recipe>();
  recipe->fn = std::move(fn);
  const auto device = x.device().type();
  recipe->autocast = at::autocast::is_autocast_enabled(device);
  recipe->autocast_dtype = at::autocast::get_autocast_dtype(device);
  return Recompute::apply(x, recipe);
}

}  // namespace shardscope
