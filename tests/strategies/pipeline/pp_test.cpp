// `pp` trains exactly like one device (p = 2, 4; m = 1, 4, 8; GPipe and 1F1B; and with two stages
// per rank interleaved 1F1B, zero-bubble, ZB-V and DualPipeV), each rank holds only its stages,
// activations travel by send/recv, and the schedules keep as many micro-batches' activations alive
// as their definitions say (checked through the rank's allocation tracking).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <map>
#include <string_view>

#include <ATen/record_function.h>

#include "engine/model/gpt_model.h"
#include "engine/train/config.h"
#include "engine/train/run.h"
#include "profiling/trace/memory_kind.h"
#include "strategies/layout/parallel_layout.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

struct PpCase {
  int p;
  int m;
  std::string schedule;
  int accum = 1;
  int layers = 4;
};

// Four blocks (or `layers`: one per stage with two stages per rank at p 3 and 4), and 8
// sequences per replica and step whatever p is (6 at p 3), so m always divides.
Config pp_config(const PpCase& c) {
  Config config = test::tiny_config("pp", 2, c.accum);  // valid for 2 blocks; then reshaped
  config.world = c.p;
  config.model.layers = c.layers;
  config.micro_batch = 8 / c.p;
  config.strategy_options.micro_batches = c.m;
  config.strategy_options.schedule = c.schedule;
  finalize(config);
  return config;
}

std::string pp_case_name(const testing::TestParamInfo<PpCase>& info) {
  std::string schedule = info.param.schedule;
  for (char& ch : schedule) ch = ch == '-' ? '_' : ch;
  return "p" + std::to_string(info.param.p) + "_m" + std::to_string(info.param.m) + "_" + schedule +
         "_accum" + std::to_string(info.param.accum);
}

class PpMatchesReference : public testing::TestWithParam<PpCase> {};

TEST_P(PpMatchesReference, AfterFiveAdamWSteps) {
  RunSummary s = run_training(pp_config(GetParam()));
  test::expect_matches_reference(s);
  EXPECT_FALSE(s.replicated);
}

INSTANTIATE_TEST_SUITE_P(Layouts, PpMatchesReference,
                         testing::Values(PpCase{2, 1, "gpipe"}, PpCase{2, 4, "gpipe"},
                                         PpCase{2, 8, "gpipe"}, PpCase{2, 1, "1f1b"},
                                         PpCase{2, 4, "1f1b"}, PpCase{2, 8, "1f1b"},
                                         PpCase{4, 1, "gpipe"}, PpCase{4, 4, "gpipe"},
                                         PpCase{4, 8, "gpipe"}, PpCase{4, 1, "1f1b"},
                                         PpCase{4, 4, "1f1b"}, PpCase{4, 8, "1f1b"},
                                         PpCase{2, 4, "1f1b", 2}, PpCase{4, 8, "gpipe", 2}),
                         pp_case_name);

// Two stages per rank (p = 2, v = 2: one block per stage), in the orders of PyTorch's
// Interleaved1F1B, InterleavedZeroBubble, ZBVZeroBubble and DualPipeV; the zero-bubble kinds
// split each backward into an input pass and a later weight pass.
INSTANTIATE_TEST_SUITE_P(
    StagesPerRank, PpMatchesReference,
    testing::Values(PpCase{2, 4, "interleaved-1f1b"}, PpCase{2, 8, "interleaved-1f1b"},
                    PpCase{2, 4, "zero-bubble"}, PpCase{2, 8, "zero-bubble"}, PpCase{2, 4, "zbv"},
                    PpCase{2, 8, "zbv"}, PpCase{2, 4, "dualpipev"}, PpCase{2, 8, "dualpipev"},
                    PpCase{2, 4, "interleaved-1f1b", 2}, PpCase{2, 4, "zero-bubble", 2},
                    PpCase{2, 4, "zbv", 2}, PpCase{2, 4, "dualpipev", 2}),
    pp_case_name);

// The orders checked against PyTorch at (p 3, v 2, m 6) and (p 4, v 2, m 8) train like one
// device too: ranks in the middle of the pipeline receive from and send to both sides, in both
// directions, and zbv and dualpipev fold it into a V across three and four ranks.
INSTANTIATE_TEST_SUITE_P(
    DeeperStagesPerRank, PpMatchesReference,
    testing::Values(PpCase{3, 6, "interleaved-1f1b", 1, 6}, PpCase{3, 6, "zero-bubble", 1, 6},
                    PpCase{3, 6, "zbv", 1, 6}, PpCase{3, 6, "dualpipev", 1, 6},
                    PpCase{4, 8, "interleaved-1f1b", 1, 8}, PpCase{4, 8, "zero-bubble", 1, 8},
                    PpCase{4, 8, "zbv", 1, 8}, PpCase{4, 8, "dualpipev", 1, 8}),
    pp_case_name);

TEST(Pp, WithSgdMomentumAndClippingAcrossStages) {
  Config c = pp_config({4, 4, "1f1b"});
  test::use_sgd_with_momentum(c);
  c.optimizer.clip_grad_norm = 0.5;  // the norm sums every stage's part
  test::expect_matches_reference(run_training(c));
}

TEST(Pp, FrozenAndUnusedParameters) {
  Config c = pp_config({2, 4, "1f1b", 2});
  c.model.frozen = {"pos_emb.weight", "blocks.3.mlp.fc.bias", "ln_f.weight"};
  c.model.unused_parameter = true;
  test::expect_matches_reference(run_training(c));
}

TEST(Pp, EachRankHoldsItsStagesParameters) {
  Config c = pp_config({4, 4, "1f1b"});
  c.reference = false;
  c.steps = 1;
  RunSummary s = run_training(c);
  ASSERT_TRUE(s.ok) << s.failure;
  // The stage's share, from the full model's parameters and the layout's stage boundaries.
  GptModel full(c.model, c.seed);
  const auto stages = stage_blocks(c.model, 4);
  std::vector<int64_t> expected(4, 0);
  for (const auto& [name, p] : full->named_params()) {
    int stage = 3;  // ln_f, lm_head
    if (name == "tok_emb.weight" || name == "pos_emb.weight") stage = 0;
    if (name.rfind("blocks.", 0) == 0) {
      const int block = std::stoi(name.substr(7));
      for (int s = 0; s < 4; ++s) {
        if (block >= stages[s].first && block < stages[s].second) stage = s;
      }
    }
    expected[stage] += p.nbytes();
  }
  int64_t total = 0;
  for (const auto& r : s.ranks) {
    EXPECT_EQ(r.memory.parameters, expected[r.rank]) << "rank " << r.rank;
    total += r.memory.parameters;
  }
  EXPECT_EQ(total, s.parameters * 4);  // every parameter on exactly one stage
}

// The trainer's span around an accumulation micro-batch holds a pipeline's own micro-batches:
// the timeline names it after the pipeline, not "micro-batch 0" (which a student would read as
// the first of the pipeline's micro-batches).
TEST(Pp, TheTimelineNamesAPipelinePassForWhatItHolds) {
  Config c = pp_config({2, 4, "1f1b", 2});
  c.reference = false;
  c.steps = 1;
  RunSummary s = run_training(c);
  ASSERT_TRUE(s.ok) << s.failure;
  for (const auto& rank : s.trace.ranks) {
    std::vector<std::string> names;
    for (const auto& e : rank.events) {
      if (e.category == profiling::Category::kMicroBatch) names.push_back(s.trace.str(e.name));
    }
    EXPECT_EQ(names, (std::vector<std::string>{"pipeline of 4 micro-batches (accumulation 0)",
                                               "pipeline of 4 micro-batches (accumulation 1)"}))
        << "rank " << rank.rank;
  }
}

TEST(Pp, ActivationsAndTheirGradientsTravelBySendAndReceive) {
  Config c = pp_config({2, 4, "1f1b"});
  c.reference = false;
  c.steps = 2;
  RunSummary s = run_training(c);
  ASSERT_TRUE(s.ok) << s.failure;
  auto count = [&](int rank, const std::string& op, int peer) {
    int n = 0;
    for (const auto& e : s.ranks[rank].comm_events) {
      if (e.step == 1 && e.op == op && e.peer == peer) ++n;
    }
    return n;
  };
  // Per step: m activations down, m gradients back.
  EXPECT_EQ(count(0, "send", 1), 4);
  EXPECT_EQ(count(1, "recv", 0), 4);
  EXPECT_EQ(count(1, "send", 0), 4);
  EXPECT_EQ(count(0, "recv", 1), 4);
}

TEST(Pp, WithTwoStagesPerRankOnlyStageBoundariesBetweenRanksTravel) {
  // p = 2, v = 2: stages 0 and 2 on rank 0, 1 and 3 on rank 1 (interleaved), so all three
  // boundaries cross ranks; zbv folds the pipeline into a V (0 and 3 on rank 0, 1 and 2 on
  // rank 1), so the middle boundary stays on rank 1 and only two cross.
  for (const auto& [schedule, crossings] : std::map<std::string, int>{
           {"interleaved-1f1b", 3}, {"zero-bubble", 3}, {"zbv", 2}, {"dualpipev", 2}}) {
    Config c = pp_config({2, 4, schedule});
    c.reference = false;
    c.steps = 2;
    RunSummary s = run_training(c);
    ASSERT_TRUE(s.ok) << schedule << ": " << s.failure;
    int sends = 0, receives = 0;
    for (const auto& r : s.ranks) {
      for (const auto& e : r.comm_events) {
        if (e.step != 1) continue;
        sends += e.op == "send";
        receives += e.op == "recv";
      }
    }
    // Per step and crossing boundary: m activations one way, m gradients the other.
    EXPECT_EQ(sends, crossings * 2 * 4) << schedule;
    EXPECT_EQ(receives, crossings * 2 * 4) << schedule;
  }
}

TEST(Pp, StagesPerRankWithSgdMomentumClippingAndFrozenParameters) {
  for (const char* schedule : {"interleaved-1f1b", "zero-bubble", "zbv"}) {
    Config c = pp_config({2, 4, schedule, 2});
    test::use_sgd_with_momentum(c);
    c.optimizer.clip_grad_norm = 0.5;  // the norm sums every stage's part, two per rank
    c.model.frozen = {"pos_emb.weight", "blocks.2.mlp.fc.bias", "ln_f.weight"};
    SCOPED_TRACE(schedule);
    test::expect_matches_reference(run_training(c));
  }
}

// Peak bytes a rank allocated, for a pipeline whose micro-batches are 2 sequences of 128
// positions: large activations next to a small model.
int64_t peak_bytes(const std::string& schedule, int m, int rank) {
  Config c = test::tiny_config("pp", 2, 1);
  c.model.layers = 2;
  c.model.seq = 128;
  c.micro_batch = m;  // 2m sequences per replica: micro-batches of 2
  c.strategy_options.micro_batches = m;
  c.strategy_options.schedule = schedule;
  c.reference = false;
  c.steps = 2;
  RunSummary s = run_training(c);
  EXPECT_TRUE(s.ok) << s.failure;
  return s.ranks[rank].peak_allocated_bytes;
}

TEST(Pp, OneFOneBKeepsAtMostStagesMicroBatchesAliveGPipeAll) {
  for (int rank : {0, 1}) {
    const int64_t gpipe4 = peak_bytes("gpipe", 4, rank), gpipe8 = peak_bytes("gpipe", 8, rank);
    const int64_t onef4 = peak_bytes("1f1b", 4, rank), onef8 = peak_bytes("1f1b", 8, rank);
    // GPipe holds every micro-batch: four more cost four micro-batches' activations.
    const double per_micro = (gpipe8 - gpipe4) / 4.0;
    ASSERT_GT(per_micro, 0.1 * gpipe4) << "stage " << rank;
    // 1F1B holds p - s of them whatever m is: its peak does not grow with m ...
    EXPECT_LT(std::abs(onef8 - onef4), 0.25 * per_micro) << "stage " << rank;
    // ... and at m = 8 stays below GPipe's by at least 8 - (p - s) - 1 micro-batches (the one
    // left over covers backward's temporaries, which GPipe's all-forward peak does not see).
    const int live = 2 - rank;
    EXPECT_LT(onef8, gpipe8 - (8 - live - 1) * per_micro)
        << "stage " << rank << ": " << per_micro << " B per micro-batch";
  }
}

// What a rank holds for backward at its peak is what its schedule's own order keeps alive
// (strategies/memory_formula: the forwards whose backward, or whose weight pass where backward
// is split, has not run yet, summed over the rank's stages): from GPipe's all to 1F1B's p - s,
// interleaving's extra warm-up and the V schedules' folded stages. Where backward is split the
// input pass already frees part of a micro-batch's activations, which the count credits only at
// the weight pass, so the formula may sit above what is held.
TEST(Pp, EachSchedulesActivationsFollowItsOrder) {
  for (const char* schedule :
       {"gpipe", "1f1b", "interleaved-1f1b", "zero-bubble", "zbv", "dualpipev"}) {
    Config c = test::tiny_config("pp", 2, 1);
    c.model.layers = 4;
    c.model.seq = 128;
    c.micro_batch = 8;
    c.strategy_options.micro_batches = 8;
    c.strategy_options.schedule = schedule;
    // The multi-stage schedules hold two stages a rank by default, one block each.
    c.reference = false;
    c.steps = 2;
    finalize(c);
    const RunSummary s = run_training(c);
    ASSERT_TRUE(s.ok) << schedule << ": " << s.failure;
    for (const auto& r : s.ranks) {
      const auto k = static_cast<size_t>(profiling::MemoryKind::kActivations);
      const double held = double(r.peak_breakdown[k]), formula = double(r.formula_bytes[k]);
      ASSERT_GT(formula, 0) << schedule;
      std::printf("%s rank %d: activations %.2f MB at the peak, formula %.2f MB\n", schedule,
                  r.rank, held / 1e6, formula / 1e6);
      EXPECT_NEAR(held, formula, 0.25 * formula) << schedule << " rank " << r.rank;
    }
  }
}

// fp32 -> bf16 casts of trainable 2-D leaves, on every thread: the Linears' weights (biases are
// 1-D; the logits, cast for the loss, are no leaf).
std::atomic<int> weight_casts{0};

std::unique_ptr<at::ObserverContext> count_weight_cast(const at::RecordFunction& fn) {
  if (std::string_view(fn.name()) != "aten::_to_copy") return nullptr;
  const auto inputs = fn.inputs();
  if (inputs.size() < 2 || !inputs[0].isTensor() || !inputs[1].isInt()) return nullptr;
  const at::Tensor& t = inputs[0].toTensor();
  if (t.dim() == 2 && t.is_leaf() && t.requires_grad() && t.scalar_type() == at::kFloat &&
      static_cast<at::ScalarType>(inputs[1].toInt()) == at::kBFloat16)
    ++weight_casts;
  return nullptr;
}

// Under bf16 a stage casts each Linear's weight once a step, however many accumulation passes the
// step has: the weights change only after the last (Megatron keeps its bf16 weights the same way).
TEST(Pp, Bf16WeightsAreCastOnceAStepOverItsAccumulationPasses) {
  std::map<int, int> per_step;
  for (int accum : {1, 2}) {
    Config config = pp_config({2, 2, "1f1b", accum, 2});  // a block a stage
    config.strategy_options.precision = "bf16";
    config.reference = false;
    config.steps = 2;
    finalize(config);
    weight_casts = 0;
    auto handle =
        at::addGlobalCallback(at::RecordFunctionCallback(count_weight_cast).needsInputs(true));
    const RunSummary s = run_training(config);
    at::removeCallback(handle);
    ASSERT_TRUE(s.ok) << s.failure;
    per_step[accum] = weight_casts.load() / config.steps;
  }
  // Four Linear weights in each stage's block, and the LM head's on the last stage.
  EXPECT_EQ(per_step[1], 4 + 4 + 1);
  EXPECT_EQ(per_step[2], 4 + 4 + 1) << "cast again in the second accumulation pass";
}

}  // namespace
}  // namespace shardscope
