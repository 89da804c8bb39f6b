#include "tests/support/reference_check.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "engine/model/gpt_model.h"
#include "engine/model/token_data.h"

namespace shardscope::test {

Config tiny_config(const std::string& strategy, int world, int grad_accum) {
  Config c = config_from_json(nlohmann::json{{"preset", "tiny"}, {"strategy", strategy}});
  c.world = world;
  c.grad_accum = grad_accum;
  c.micro_batch = 2;
  c.steps = 5;
  c.threads_per_rank = 1;
  // The equivalence suites run once over the default backend (shm) and once more over Gloo
  // (ctest's EquivalenceOverGloo sets this).
  if (const char* backend = std::getenv("SHARDSCOPE_TEST_BACKEND")) c.backend = backend;
  // The rerun over Gloo checks the transport: every collective of a step runs in its first two
  // steps, the second on weights the first updated, and the shm run checks all five. Gloo over
  // loopback costs 3-4 times shm's time (mostly in the kernel's TCP), which five steps a case
  // took from the suite's ten minutes.
  if (const char* steps = std::getenv("SHARDSCOPE_TEST_STEPS")) c.steps = std::atoi(steps);
  finalize(c);
  return c;
}

void use_sgd_with_momentum(Config& c) {
  c.optimizer.name = "sgd";
  c.optimizer.lr = 0.5;
  c.optimizer.momentum = 0.9;
  c.optimizer.weight_decay = 0.0;
}

void expect_matches_reference(const RunSummary& s) {
  ASSERT_TRUE(s.ok) << s.failure;
  EXPECT_TRUE(s.ranks_agree) << "max delta " << s.max_rank_delta;
  ASSERT_TRUE(s.reference.has_value());
  EXPECT_LE(s.reference->deviation.rel, kReferenceTolerance)
      << "worst " << s.reference->deviation.worst << " abs " << s.reference->deviation.max_abs;
  ASSERT_EQ(s.steps.size(), s.reference->losses.size());
  for (size_t i = 0; i < s.steps.size(); ++i) {
    EXPECT_NEAR(s.steps[i].loss, s.reference->losses[i], 1e-4);
  }
  EXPECT_NE(s.steps.front().loss, s.steps.back().loss);
}

void expect_toy_models_match_reference(const std::string& strategy) {
  Config frozen = tiny_config(strategy, 4, 2);
  frozen.model.frozen = {"pos_emb.weight", "blocks.1.mlp.fc.bias", "blocks.0.ln1.weight"};
  expect_matches_reference(run_training(frozen));

  Config tied = tiny_config(strategy, 4, 2);
  tied.model.tie_embeddings = true;
  expect_matches_reference(run_training(tied));

  Config unused = tiny_config(strategy, 2, 2);
  unused.model.unused_parameter = true;
  unused.strategy_options.find_unused_parameters = true;
  RunSummary s = run_training(unused);
  expect_matches_reference(s);
  // Nobody used it, so nobody stepped it: not even weight decay touched it.
  GptModel initial(unused.model, unused.seed);
  for (const auto& [name, w] : s.weights) {
    if (name == "unused") {
      EXPECT_TRUE(torch::equal(w, initial->named_parameters()["unused"]));
    }
  }
}

NamedTensors batches_of(const Config& c) {
  auto corpus = TokenCorpus::load(c.data, c.model.vocab, c.seed);
  BatchSampler sampler(corpus, c.model.seq, c.micro_batch, c.world, c.grad_accum, c.seed);
  std::vector<torch::Tensor> inputs, targets;
  for (int step = 0; step < c.steps; ++step) {
    for (int rank = 0; rank < c.world; ++rank) {
      for (int micro = 0; micro < c.grad_accum; ++micro) {
        Batch b = sampler.micro_batch(step, rank, micro);
        inputs.push_back(b.inputs);
        targets.push_back(b.targets);
      }
    }
  }
  auto shape = std::vector<int64_t>{c.steps, c.world, c.grad_accum, c.micro_batch, c.model.seq};
  return {{"inputs", torch::stack(inputs).view(shape)},
          {"targets", torch::stack(targets).view(shape)}};
}

std::vector<StepTraffic> traffic_per_step(const RankSummary& rank) {
  return shardscope::traffic_per_step(rank.comm_events);
}

}  // namespace shardscope::test
