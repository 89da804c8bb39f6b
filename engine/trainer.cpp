#include "engine/trainer.h"

#include <algorithm>
#include <stdexcept>

#include <torch/torch.h>

#include "engine/comm.h"
#include "engine/optimizer_factory.h"
#include "engine/token_data.h"
#include "profiling/clock.h"

namespace shardscope {
namespace {

Batch to_device(const Batch& batch, const c10::Device& device) {
  if (device.is_cpu()) return batch;
  return {batch.inputs.to(device), batch.targets.to(device)};
}

}  // namespace

RankResult train_rank(RankContext& ctx, Strategy& strategy, const StepCallback& on_step) {
  const Config& config = *ctx.config;
  RankResult result;
  result.rank = ctx.rank;
  strategy.setup(ctx);

  for (int step = 0; step < config.steps; ++step) {
    if (config.fault.enabled() && config.fault.rank == ctx.rank && config.fault.step == step) {
      throw std::runtime_error("injected fault (kind=throw) at step " + std::to_string(step));
    }
    const int64_t t0 = profiling::now_ns();
    strategy.zero_grad();
    double local_loss = 0.0;
    const double scale = 1.0 / config.grad_accum;
    for (int micro = 0; micro < config.grad_accum; ++micro) {
      Batch batch = to_device(ctx.sampler->micro_batch(step, ctx.rank, micro), ctx.device);
      auto loss = strategy.forward_backward(batch, micro == config.grad_accum - 1, scale);
      local_loss += loss.item<double>() * scale;
    }
    strategy.sync_gradients();
    if (config.optimizer.clip_grad_norm > 0)
      strategy.clip_gradients(config.optimizer.clip_grad_norm);
    const double lr = learning_rate(config.optimizer, step, config.steps);
    strategy.optimizer_step(lr);
    const double local_time = (profiling::now_ns() - t0) * 1e-9;

    // One small all_gather gives every rank the mean loss and the slowest rank's time.
    auto mine = torch::tensor({local_loss, local_time}, torch::kDouble);
    auto all = torch::empty({2 * ctx.world}, torch::kDouble);
    ctx.comm->all_gather_into(all, mine);
    auto per_rank = all.view({ctx.world, 2});
    StepRecord record;
    record.step = step;
    record.local_loss = local_loss;
    record.local_step_time_s = local_time;
    record.loss = per_rank.select(1, 0).mean().item<double>();
    record.step_time_s = per_rank.select(1, 1).max().item<double>();
    record.lr = lr;
    result.steps.push_back(record);
    if (ctx.rank == 0 && on_step) on_step(record);
  }
  result.weights = strategy.full_weights();
  result.replicated = strategy.replicated();
  result.memory = strategy.memory();
  return result;
}

}  // namespace shardscope
