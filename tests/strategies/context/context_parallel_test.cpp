// `cp` (context parallelism, ring attention) trains exactly like one device: c = 2 and 4, with
// gradient accumulation, with a data-parallel dimension synchronised by ddp_bucketed or zero1,
// under plain SGD (which shows any wrong gradient scale at once). The zig-zag split gives every
// rank the same attention work; the ring's sends are posted before the attention compute of the
// block in hand and waited for after it; activations per rank fall as 1/c.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include <torch/torch.h>

#include "engine/train/config.h"
#include "engine/train/run.h"
#include "engine/train/strategy.h"
#include "engine/train/strategy_registry.h"
#include "profiling/record/memory_tags.h"
#include "profiling/record/memory_tracker.h"
#include "profiling/trace/memory_kind.h"
#include "strategies/common/memory_formula.h"
#include "strategies/context/ring_attention.h"
#include "tests/support/rank_threads.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

struct CpCase {
  int world;
  int c;
  int accum = 1;
  std::string sync = "ddp_bucketed";
  bool checkpointing = false;
};

Config cp_config(const CpCase& k) {
  Config config = test::tiny_config("cp", k.world, k.accum);
  config.strategy_options.context_parallel = k.c;
  config.strategy_options.data_parallel_sync = k.sync;
  config.strategy_options.activation_checkpointing = k.checkpointing;
  finalize(config);
  return config;
}

class CpMatchesReference : public testing::TestWithParam<CpCase> {};

TEST_P(CpMatchesReference, AfterFiveAdamWSteps) {
  RunSummary s = run_training(cp_config(GetParam()));
  test::expect_matches_reference(s);
  EXPECT_TRUE(s.replicated);
}

TEST_P(CpMatchesReference, WithSgdMomentumAndClipping) {
  Config c = cp_config(GetParam());
  test::use_sgd_with_momentum(c);
  c.optimizer.clip_grad_norm = 0.5;
  test::expect_matches_reference(run_training(c));
}

INSTANTIATE_TEST_SUITE_P(Degrees, CpMatchesReference,
                         testing::Values(CpCase{2, 2}, CpCase{4, 4}, CpCase{2, 2, 2}, CpCase{4, 2},
                                         CpCase{4, 2, 2, "zero1"}, CpCase{1, 1},
                                         CpCase{4, 4, 2, "ddp_bucketed", true}),
                         [](const auto& info) {
                           return "world" + std::to_string(info.param.world) + "_cp" +
                                  std::to_string(info.param.c) + "_accum" +
                                  std::to_string(info.param.accum) + "_" + info.param.sync +
                                  (info.param.checkpointing ? "_checkpointed" : "");
                         });

TEST(CpZigzag, EveryTokenIsHeldByExactlyOneRank) {
  for (int c : {1, 2, 4}) {
    std::set<int64_t> seen;
    for (int r = 0; r < c; ++r) {
      auto positions = cp::zigzag_positions(32, r, c);
      ASSERT_EQ(positions.numel(), 32 / c);
      for (int64_t i = 0; i < positions.numel(); ++i) seen.insert(positions[i].item<int64_t>());
    }
    EXPECT_EQ(seen.size(), 32u) << "c " << c;
    EXPECT_EQ(*seen.begin(), 0);
    EXPECT_EQ(*seen.rbegin(), 31);
  }
}

// Causal attention over chunks 0..2c-1: zig-zag gives every rank 2c+1 chunk pairs; cutting the
// sequence into c contiguous pieces would give the last rank 4c-1 and the first 3.
TEST(CpZigzag, BalancesTheCausalAttentionWork) {
  for (int c : {2, 4, 8}) {
    for (int r = 0; r < c; ++r) {
      EXPECT_EQ(cp::attended_pairs(cp::zigzag_chunks(r, c), 2 * c), 2 * c + 1) << c << " " << r;
    }
    const int first = cp::attended_pairs({0, 1}, 2 * c);
    const int last = cp::attended_pairs({2 * c - 2, 2 * c - 1}, 2 * c);
    EXPECT_EQ(first, 3);
    EXPECT_EQ(last, 4 * c - 1);
  }
}

// The timeline's claim: every ring step but the last of a layer sends the next block while the
// rank computes on this one. Each forward ring-attention span (but the last of its layer) lies
// inside a send of the ring: issued before the span began, waited for after it ended.
TEST(Cp, TheRingSendsTravelUnderTheAttentionCompute) {
  Config c = cp_config({4, 4});
  c.reference = false;
  c.steps = 2;
  RunSummary s = run_training(c);
  ASSERT_TRUE(s.ok) << s.failure;
  for (const auto& rank : s.trace.ranks) {
    std::vector<std::pair<int64_t, int64_t>> spans;  // forward ring steps of step 1
    for (const auto& e : rank.events) {
      const std::string name = s.trace.str(e.name);
      if (e.step == 1 && e.category == profiling::Category::kForward &&
          name.rfind("forward ring attention", 0) == 0) {
        spans.emplace_back(e.t0_ns, e.t1_ns);
      }
    }
    // 2 blocks x 4 ring steps, one micro-batch.
    ASSERT_EQ(spans.size(), 8u) << "rank " << rank.rank;
    int covered = 0;
    for (const auto& [t0, t1] : spans) {
      for (const auto& e : s.ranks[rank.rank].comm_events) {
        if (e.op == "send" && e.t_issue_ns <= t0 && e.t_wait_begin_ns >= t1) {
          ++covered;
          break;
        }
      }
    }
    EXPECT_EQ(covered, 2 * 3) << "rank " << rank.rank;  // all but each layer's last step
    // Per step and block: 3 key/value blocks forward, 3 again in backward, 4 gradients back.
    int sends = 0;
    for (const auto& e : s.ranks[rank.rank].comm_events) sends += e.step == 1 && e.op == "send";
    EXPECT_EQ(sends, 2 * (3 + 3 + 4)) << "rank " << rank.rank;
  }
}

// Under bf16 autocast the key/value blocks travel in bf16, as a real ring sends them: half the
// bytes of fp32 (their gradients accumulate and travel in fp32 either way).
TEST(Cp, KeyValueBlocksTravelInTheComputeDtype) {
  std::map<std::string, int64_t> first_send;
  for (const char* precision : {"fp32", "bf16"}) {
    Config c = cp_config({2, 2});
    c.strategy_options.precision = precision;
    c.reference = false;
    c.steps = 1;
    RunSummary s = run_training(c);
    ASSERT_TRUE(s.ok) << s.failure;
    for (const auto& e : s.ranks[0].comm_events) {
      if (e.op == "send") {
        first_send[precision] = e.bytes;
        break;
      }
    }
  }
  EXPECT_GT(first_send["fp32"], 0);
  EXPECT_EQ(first_send["bf16"] * 2, first_send["fp32"]);
}

// Each ring step posts a send to the next rank and then a receive from the previous one; NCCL
// would run them in that order on one stream per pair and deadlock, so cp refuses it by name.
TEST(Cp, RefusesNccl) {
  Config c = cp_config({2, 2});
  c.device = "cuda:0";
  c.backend = "nccl";
  try {
    StrategyRegistry::instance().find("cp")->validate(c);
    FAIL() << "nccl accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "backend");
  }
}

// Activations per rank against c, at the same sequences per replica (8 of 256 tokens): each rank
// saves what one device saves for s/c tokens. Measured as the ranks' allocation tracking sees
// them when backward begins (a run's peak can fall later, once gradients and buckets outweigh
// them), against the formula and against 1/c of one rank's.
int64_t most_activations_at_backward(const Config& config) {
  std::vector<int64_t> per_rank(config.world, 0);
  test::run_on_ranks(config.world, [&](RankContext& ctx) {
    ctx.config = &config;
    profiling::RankMemoryTracker tracker(ctx.rank, nullptr);
    profiling::RankMemoryTracker::ThreadScope scope(&tracker);
    profiling::set_memory_phase(profiling::MemoryKind::kParameters);
    auto strategy = StrategyRegistry::instance().find(config.strategy)->make();
    strategy->setup(ctx);
    profiling::set_memory_phase(profiling::MemoryKind::kActivations);
    const auto tokens = torch::arange(int64_t{config.micro_batch} * config.model.seq)
                            .view({config.micro_batch, -1});
    strategy->forward_backward({tokens % config.model.vocab, (tokens + 1) % config.model.vocab},
                               /*last_micro=*/true, 1.0);
    strategy->sync_gradients();
    profiling::set_memory_phase(profiling::MemoryKind::kTemporaries);
    per_rank[ctx.rank] = tracker.activations_at_backward();
  });
  return *std::max_element(per_rank.begin(), per_rank.end());
}

TEST(Cp, ActivationMemoryPerRankFallsAsOneOverC) {
  const int k = static_cast<int>(profiling::MemoryKind::kActivations);
  for (bool checkpointing : {false, true}) {
    std::map<int, double> measured;
    for (int c : {1, 2, 4}) {
      Config config = test::tiny_config("cp", c, 1);
      config.model.seq = 256;
      config.micro_batch = 8 / c;
      config.strategy_options.activation_checkpointing = checkpointing;
      finalize(config);
      measured[c] = double(most_activations_at_backward(config));
      const double formula = double(memory_formula(config, 0)[k]);
      EXPECT_NEAR(measured[c], formula, 0.10 * formula) << "c " << c;
      std::printf("cp %d%s: activations per rank %.2f MB (formula %.2f MB)\n", c,
                  checkpointing ? " checkpointed" : "", measured[c] / 1e6, formula / 1e6);
    }
    for (int c : {2, 4}) {
      EXPECT_NEAR(measured[c] / measured[1], 1.0 / c, 0.10 / c)
          << "c " << c << ": " << measured[c] / 1e6 << " MB against " << measured[1] / 1e6
          << " MB at c 1" << (checkpointing ? " (checkpointed)" : "");
    }
  }
}

}  // namespace
}  // namespace shardscope
