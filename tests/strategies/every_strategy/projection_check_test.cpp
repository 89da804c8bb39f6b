// The configuration projection (app/analysis/configuration_projection, which prices
// profiling/projection/transformer_costs' ops) against what runs here record: a tensor-parallel
// rank's collectives of one step, by c10d op (all_reduce, all_gather_into, reduce_scatter_tensor):
// their calls and bytes.
#include <gtest/gtest.h>

#include <map>

#include "app/analysis/configuration_projection.h"
#include "engine/train/config_bounds.h"
#include "engine/train/run.h"
#include "profiling/projection/hardware_profile.h"
#include "profiling/projection/transformer_costs.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

struct Tally {
  int calls = 0;
  int64_t bytes = 0;  // as Comm records them: all_gather's contribution, the others' whole input
};
using Tallies = std::map<std::string, Tally>;  // by c10d op

// Rank 0's collectives in the second step (the first also broadcasts the initial weights), less
// the trainer's own [loss, step time] gather that ends each step (the one double collective).
Tallies recorded(const RunSummary& s) {
  Tallies t;
  for (const auto& e : s.ranks[0].comm_events) {
    if (e.step != 1 || e.dtype == "Double") continue;
    t[e.op].calls += 1;
    t[e.op].bytes += e.bytes;
  }
  return t;
}

// What the projection prices for the same step: the embedding, every block and the head, each
// pass, and with sequence parallelism the replicated parameters' gradient sum.
Tallies projected(const Config& config, int tp) {
  profiling::PassShape shape;
  shape.model = model_shape(config.model);
  shape.sequences = int64_t(config.micro_batch) * tp;  // a tensor group shares its sequences
  shape.tp = tp;
  shape.sequence_parallel = config.strategy_options.sequence_parallel;
  shape.activation_checkpointing = config.strategy_options.activation_checkpointing;
  const auto hw = profiling::load_hardware_profile("8xA100");
  Tallies t;
  const auto add = [&](const profiling::PassOps& ops, int times) {
    for (const auto* pass : {&ops.forward, &ops.backward_input, &ops.backward_weight}) {
      for (const auto& op : *pass) {
        if (op.collective.empty()) continue;
        t[op.collective].calls += times;
        t[op.collective].bytes +=
            times * int64_t(op.collective == "all_gather_into" ? op.bytes / tp : op.bytes);
      }
    }
  };
  add(profiling::embedding_ops(shape, hw, hw), 1);
  add(profiling::block_ops(shape, hw, hw), config.model.layers);
  add(profiling::head_ops(shape, hw, hw), 1);
  if (shape.sequence_parallel) {
    t["all_reduce"].calls += 1;
    t["all_reduce"].bytes += int64_t(profiling::sequence_parallel_gradient_bytes(shape.model));
  }
  return t;
}

std::string describe(const Tallies& t) {
  std::string out;
  for (const auto& [op, tally] : t)
    out += op + ": " + std::to_string(tally.calls) + " calls, " + std::to_string(tally.bytes) +
           " bytes; ";
  return out;
}

struct Case {
  int tp;
  bool sequence_parallel;
};

TEST(ProjectionCheck, TensorCollectivesAreWhatARunRecords) {
  for (const Case c : {Case{2, false}, Case{2, true}, Case{4, true}, Case{4, false}}) {
    Config config = test::tiny_config("tp", c.tp, 1);
    config.reference = false;
    config.steps = 2;
    config.strategy_options.precision = "bf16";
    config.strategy_options.sequence_parallel = c.sequence_parallel;
    finalize(config);
    const RunSummary s = run_training(config);
    ASSERT_TRUE(s.ok) << s.failure;
    const Tallies ran = recorded(s), priced = projected(config, c.tp);
    const std::string which =
        "tp " + std::to_string(c.tp) + (c.sequence_parallel ? " with sequence parallelism" : "");
    ASSERT_FALSE(ran.empty()) << which;
    for (const auto& [op, tally] : ran) {
      EXPECT_EQ(priced.count(op) ? priced.at(op).calls : 0, tally.calls)
          << which << ", " << op << "\n  ran:    " << describe(ran)
          << "\n  priced: " << describe(priced);
      EXPECT_EQ(priced.count(op) ? priced.at(op).bytes : 0, tally.bytes) << which << ", " << op;
    }
    for (const auto& [op, tally] : priced)
      EXPECT_TRUE(ran.count(op)) << which << ": priced " << op << " that the run never calls";
  }
}

// What a pipeline rank sends in a step: one activation a micro-batch to the next stage, one
// gradient back, each its tensor rank's 1/t of the fp32 residual stream (Megatron's
// scatter-gather). The projected step's trace holds the same sends, op for op and byte for byte.
TEST(ProjectionCheck, PipelineSendsAreWhatARunSends) {
  struct PipelineCase {
    const char* strategy;
    int world, tp, pp, micro_batches;
    const char* schedule;
  };
  for (const PipelineCase c :
       {PipelineCase{"pp", 2, 1, 2, 4, "gpipe"}, PipelineCase{"pp", 2, 1, 2, 2, "1f1b"},
        PipelineCase{"hybrid", 4, 2, 2, 4, "interleaved-1f1b"}}) {
    Config config = test::tiny_config(c.strategy, c.world, 1);
    config.reference = false;
    config.steps = 2;
    config.strategy_options.precision = "bf16";
    config.strategy_options.tensor_parallel = c.tp;
    config.strategy_options.pipeline_parallel = c.pp;
    config.strategy_options.micro_batches = c.micro_batches;
    config.strategy_options.schedule = c.schedule;
    config.model.layers = 4;  // interleaving's two stages a rank need a block each
    finalize(config);
    const std::string which = std::string(c.strategy) + " tp " + std::to_string(c.tp) + " pp " +
                              std::to_string(c.pp) + " " + c.schedule;
    const RunSummary s = run_training(config);
    ASSERT_TRUE(s.ok) << which << ": " << s.failure;
    // Every rank's sends in the second step, against the projection's of its pipeline rank (a
    // tensor rank sends what its pipeline rank's trace shows).
    const auto projection =
        analysis::project_configuration(config, profiling::load_hardware_profile("8xA100"), 1);
    int64_t projected_sends = 0, projected_bytes = 0;
    for (const auto& rank : projection.trace.ranks) {
      for (const auto& e : rank.events) {
        if (projection.trace.str(e.name) != "send") continue;
        ++projected_sends;
        projected_bytes += e.bytes;
      }
    }
    int64_t sends = 0, bytes = 0;
    for (const auto& rank : s.ranks) {
      for (const auto& e : rank.comm_events) {
        if (e.step != 1 || e.op != "send") continue;
        ++sends;
        bytes += e.bytes;
      }
    }
    ASSERT_GT(sends, 0) << which;
    EXPECT_EQ(projected_sends * c.tp, sends) << which;
    EXPECT_EQ(projected_bytes * c.tp, bytes) << which;
  }
}

}  // namespace
}  // namespace shardscope
