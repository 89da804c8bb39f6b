#include "app/perf/plain_loop.h"

#include "engine/model/mixed_precision.h"
#include "engine/train/optimizer_factory.h"

namespace shardscope::perf {

PlainLoop::PlainLoop(const Config& config)
    : config_(config), device_(config.device), model_(config.model, config.seed) {
  model_->to(device_);
  optimizer_ = make_optimizer(config.optimizer, model_->parameters());
  auto corpus = TokenCorpus::load(config.data, config.model.vocab, config.seed);
  sampler_ = std::make_unique<BatchSampler>(corpus, config.model.seq, config.micro_batch, 1, 1,
                                            config.seed);
}

torch::Tensor PlainLoop::step(int step, const PhaseRunner& run) {
  const auto in_phase = [&](Phase phase, const std::function<void()>& fn) {
    run ? run(phase, fn) : fn();
  };
  optimizer_->zero_grad();
  Batch batch = sampler_->micro_batch(step, 0, 0);
  if (!device_.is_cpu()) batch = {batch.inputs.to(device_), batch.targets.to(device_)};
  torch::Tensor loss;
  in_phase(Phase::kForward, [&] {
    ComputePrecisionScope precision(config_.strategy_options, device_.type());
    loss = model_->loss(batch);
  });
  in_phase(Phase::kBackward, [&] { loss.backward(); });
  in_phase(Phase::kOptimizer, [&] { optimizer_->step(); });
  return loss;
}

}  // namespace shardscope::perf
