// A projected data-parallel step drawn as it runs (app/analysis/data_parallel_trace): its parts
// add up to the projected step, and its collectives sit beside the compute they overlap.
#include "app/analysis/data_parallel_trace.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "app/analysis/configuration_projection.h"
#include "app/analysis/trace_open.h"
#include "engine/train/config.h"

namespace shardscope::analysis {
namespace {

ConfigurationProjection projected(const std::string& strategy, int world = 8,
                                  const std::string& hardware = "8xA100", int per_rank = 8) {
  Config c = config_from_json(nlohmann::json{{"strategy", strategy},
                                             {"world", world},
                                             {"preset", "gpt2-small"},
                                             {"global_batch", per_rank * world},
                                             {"grad_accum", 2},
                                             {"strategy_options", {{"precision", "bf16"}}}});
  return project_configuration(c, profiling::load_hardware_profile(hardware), 1);
}

// Seconds of rank 0's events by category and lane.
std::map<std::pair<profiling::Category, int>, double> seconds(const profiling::Trace& t) {
  std::map<std::pair<profiling::Category, int>, double> out;
  for (const auto& e : t.ranks.at(0).events)
    out[{e.category, int(e.lane)}] += (e.t1_ns - e.t0_ns) * 1e-9;
  return out;
}

TEST(DataParallelTrace, TheDrawnStepIsTheProjectedOneWithItsCollectivesBesideTheCompute) {
  // The A100 measured no slowdown of its compute beside a collective; the H100 did, and slows it
  // where its kernels fill the GPU (64 sequences a rank: 32 a micro-batch).
  for (const auto& [strategy, hardware, per_rank] : {std::tuple{"ddp_bucketed", "8xA100", 8},
                                                     {"zero1", "8xA100", 8},
                                                     {"zero2", "8xA100", 8},
                                                     {"fsdp", "8xA100", 8},
                                                     {"ddp_bucketed", "8xH100", 64},
                                                     {"zero2", "8xH100", 64},
                                                     {"fsdp", "8xH100", 64},
                                                     {"fsdp", "8xH100", 8}}) {
    const ConfigurationProjection p = projected(strategy, 8, hardware, per_rank);
    const auto s = seconds(p.trace);
    using C = profiling::Category;
    const auto at = [&](C c, int lane) {
      const auto it = s.find({c, lane});
      return it == s.end() ? 0.0 : it->second;
    };
    EXPECT_NEAR(at(C::kStep, profiling::kHostLane), p.step_s, 1e-6) << strategy;
    // The passes as long as they ran: their compute alone, and what the collectives beside them
    // slowed it by (part of the data-parallel communication's cost).
    EXPECT_NEAR(at(C::kForward, profiling::kHostLane) + at(C::kBackward, profiling::kHostLane),
                p.compute_s + p.data_comm_slowed_s, 1e-6)
        << strategy;
    if (std::string(hardware) == "8xA100") {
      EXPECT_EQ(p.data_comm_slowed_s, 0.0) << strategy;
    }
    EXPECT_NEAR(at(C::kOptimizer, profiling::kHostLane), p.optimizer_s, 1e-6) << strategy;
    // What the compute did not hide: waits inside the passes, the sync past backward and after
    // the step.
    EXPECT_NEAR(at(C::kWait, profiling::kHostLane) + at(C::kGradSync, profiling::kHostLane),
                p.data_comm_s - p.data_comm_slowed_s, 1e-6)
        << strategy << " on " << hardware;
    // The collectives beside the compute: more of them than what is exposed.
    EXPECT_GT(at(C::kCollective, profiling::kCommLane), p.data_comm_s) << strategy;
  }
  // A pass the collectives beside it slowed says so by name, and its span is what it ran: on the
  // H100 where its kernels fill the GPU. At 32 sequences a micro-batch, gpt2-small's blocks too.
  // At 4, every block's and the embeddings' passes are bound by their host's dispatch, and their
  // kernels, slowed, keep pace: only the LM head's backward, bound by its kernels, is slowed
  // beside ZeRO-3's gathers, once a micro-batch; DDP's buckets meet only host-bound passes. On
  // the A100, none.
  const auto slowed = [](const profiling::Trace& t) {
    std::pair<int, double> spans;
    for (const auto& e : t.ranks.at(0).events) {
      const std::string name = t.str(e.name);
      if (name.find(", slowed beside the collectives") == std::string::npos) continue;
      ++spans.first, spans.second += (e.t1_ns - e.t0_ns) * 1e-9;
    }
    return spans;
  };
  const auto slowed_backwards = [](const profiling::Trace& t) {
    int count = 0;
    for (const auto& e : t.ranks.at(0).events)
      count += t.str(e.name).rfind("backward ", 0) == 0 &&
               t.str(e.name).find(", slowed") != std::string::npos;
    return count;
  };
  for (const char* strategy : {"fsdp", "ddp_bucketed"}) {
    const ConfigurationProjection big = projected(strategy, 8, "8xH100", 64);
    const ConfigurationProjection small = projected(strategy, 8, "8xH100", 8);
    EXPECT_GT(big.data_comm_slowed_s, 0.0) << strategy;
    EXPECT_GT(slowed(big.trace).second, big.data_comm_slowed_s) << strategy;
    EXPECT_GT(slowed(big.trace).first, slowed(small.trace).first) << strategy;
    EXPECT_EQ(slowed(projected(strategy, 8, "8xA100", 64).trace).first, 0) << strategy;
  }
  const profiling::Trace fsdp = projected("fsdp", 8, "8xH100", 8).trace;
  EXPECT_EQ(slowed(fsdp).first, 2);  // the head's backward in each of the two micro-batches
  EXPECT_EQ(slowed_backwards(fsdp), 2);
  EXPECT_EQ(slowed(projected("ddp_bucketed", 8, "8xH100", 8).trace).first, 0);
  // ZeRO-3 gathers in every micro-batch; DDP reduces only in the last one's backward: none
  // starts during the first micro-batch (before the second forward starts).
  const auto collectives_in_first_micro_batch = [](const profiling::Trace& t) {
    int64_t second_forward = -1;
    for (const auto& e : t.ranks.at(0).events)
      if (t.str(e.name) == "forward 1" && second_forward < 0) second_forward = e.t0_ns;
    int count = 0;
    for (const auto& e : t.ranks.at(0).events)
      count += e.category == profiling::Category::kCollective && e.t0_ns < second_forward;
    return count;
  };
  EXPECT_GT(collectives_in_first_micro_batch(projected("fsdp").trace), 1);
  EXPECT_EQ(collectives_in_first_micro_batch(projected("ddp_bucketed").trace), 0);
}

// Accumulation runs each micro-batch's backward before the next forward, on one device too (a
// pipeline of one stage would run every forward first).
TEST(DataParallelTrace, EachMicroBatchsBackwardComesBeforeTheNextForward) {
  for (const char* strategy : {"single", "ddp_bucketed", "fsdp"}) {
    const profiling::Trace t = projected(strategy, strategy == std::string("single") ? 1 : 8).trace;
    int64_t backward0 = -1, forward1 = -1;
    for (const auto& e : t.ranks.at(0).events) {
      if (t.str(e.name) == "backward 0" && backward0 < 0) backward0 = e.t0_ns;
      if (t.str(e.name) == "forward 1" && forward1 < 0) forward1 = e.t0_ns;
    }
    ASSERT_GE(backward0, 0) << strategy;
    EXPECT_LT(backward0, forward1) << strategy;
  }
}

// The trace says which job it draws: the world the step was projected for, of which it draws one
// rank (its data-parallel peers repeat it), over the backend GPUs a rank each would use.
TEST(DataParallelTrace, SaysTheWorldItWasProjectedForThoughItDrawsOneRank) {
  const profiling::Trace t = projected("fsdp", 8).trace;
  EXPECT_EQ(t.ranks.size(), 1u);
  EXPECT_EQ(t.run.world, 8);
  EXPECT_EQ(t.run.backend, "nccl");
  // What report's header and the app's menu bar say of it.
  EXPECT_EQ(ranks_text(t), "1 ranks drawn of world 8 (the others repeat them)");
}

}  // namespace
}  // namespace shardscope::analysis
