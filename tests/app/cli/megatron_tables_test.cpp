// `project` of Megatron's published GPT runs on Selene's A100s against the tables that measured
// them (Narayanan et al. 2021, Smith et al. 2022), none of them named by issue 34 and none fitted.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.h"
#include "tests/support/megatron_flags.h"

namespace shardscope {
namespace {

using test::cli;
using test::mean;
using test::megatron_22b;

// Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on GPU Clusters Using
// Megatron-LM"), Table 1: weak scaling from 1.7B to 1T parameters on Selene's A100s (s 2048,
// V 51 200, activation recomputation), teraFLOP/s per GPU by the paper's own count,
// 96 B s l h^2 (1 + s/6h + V/16lh). A table this issue does not name, and nothing was fitted to
// it. The paper gives no micro-batch size: one sequence (what the 1T model needs to fit), with
// 1F1B, its attention (scores materialised) and Megatron-LM's default clipping. 2026-11-27: mean
// 4.2 %, largest -12.2 % (18B).
// One of Megatron's published GPT layouts on Selene's A100s in the papers' configuration (s 2048,
// V 51 200, full recompute, unfused attention, clipping), one sequence a micro-batch: its
// projected teraFLOP/s a GPU by the papers' own count, 96·B·s·l·h²(1 + s/6h + V/16lh).
struct MegatronRun {
  int heads, hidden, layers, t, p, gpus, batch;
};

double projected_tflops(const MegatronRun& r) {
  const int d = r.gpus / (r.t * r.p), per_replica = r.batch / d;
  std::vector<std::string> args = megatron_22b({{"--nodes", std::to_string(r.gpus / 8)},
                                                {"--strategy", "hybrid"},
                                                {"--world", std::to_string(r.gpus)},
                                                {"--tp", std::to_string(r.t)},
                                                {"--pp", std::to_string(r.p)},
                                                {"--layers", std::to_string(r.layers)},
                                                {"--d-model", std::to_string(r.hidden)},
                                                {"--heads", std::to_string(r.heads)},
                                                {"--global-batch", std::to_string(r.batch)},
                                                {"--attention", "unfused"},
                                                {"--clip-grad-norm", "1"}},
                                               {"--activation-checkpointing", "--json"});
  // A replica's sequences one at a time: micro-batches of a pipeline, else accumulation passes.
  args.insert(args.end(),
              {r.p > 1 ? "--micro-batches" : "--grad-accum", std::to_string(per_replica)});
  const test::CliResult out = cli(args);
  EXPECT_EQ(out.code, 0) << out.err;
  if (out.code != 0) return 0;
  const double step = nlohmann::json::parse(out.out).at("step_s");
  const double B = r.batch, s = 2048, l = r.layers, h = r.hidden, V = 51200;
  const double flops = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  return flops / (step * r.gpus) / 1e12;
}

TEST(MegatronTables, NarayananTable1WeakScalingIsWithinFifteenPercent) {
  struct Row {
    const char* model;
    MegatronRun run;
    double tflops;  // the paper's, a GPU
  };
  const Row rows[] = {
      {"1.7B", {24, 2304, 24, 1, 1, 32, 512}, 137},
      {"3.6B", {32, 3072, 30, 2, 1, 64, 512}, 138},
      {"7.5B", {32, 4096, 36, 4, 1, 128, 512}, 142},
      {"18B", {48, 6144, 40, 8, 1, 256, 1024}, 135},
      {"39B", {64, 8192, 48, 8, 2, 512, 1536}, 138},
      {"76B", {80, 10240, 60, 8, 4, 1024, 1792}, 140},
      {"145B", {96, 12288, 80, 8, 8, 1536, 2304}, 148},
      {"310B", {128, 16384, 96, 8, 16, 1920, 2160}, 155},
      {"530B", {128, 20480, 105, 8, 35, 2520, 2520}, 163},
      {"1T", {160, 25600, 128, 8, 64, 3072, 3072}, 163},
  };
  std::vector<double> errors;
  for (const Row& r : rows) {
    const double ours = projected_tflops(r.run);
    errors.push_back(std::abs(ours / r.tflops - 1));
    std::printf("%s: ours %.0f TFLOP/s a GPU, paper %.0f (%+.1f %%)\n", r.model, ours, r.tflops,
                100 * (ours / r.tflops - 1));
    EXPECT_LT(errors.back(), 0.15) << r.model;
  }
  EXPECT_LT(mean(errors), 0.06);
}

// Smith et al. 2022 (MT-NLG 530B, section 2.4): the same 530B layout (t 8, p 35, batch 1920) on
// 280, 350 and 420 DGX A100s took 60.1, 50.2 and 44.4 s an iteration, 126, 121 and 113
// TFLOP/s a GPU. That ran DeepSpeed's pipeline engine, not Megatron-LM's, and Megatron-LM's
// own 530B run (Narayanan's Table 1, 163 TFLOP/s on 2520 GPUs, which we come within 4 % of)
// was 30 % faster a GPU at that scale. What we project is our pipeline, which follows
// Megatron-LM's: faster than this table, by less than Megatron-LM was, and falling as the
// replicas' micro-batches shrink and the bubble grows, as the table does.
TEST(MegatronTables, MtNlgOnDeepSpeedsPipelineIsSlowerThanOursAsMegatronLmWas) {
  const double paper[] = {126, 121, 113};
  double previous = 1e9;
  for (int i = 0; i < 3; ++i) {
    const int nodes = 280 + 70 * i;
    const double ours = projected_tflops({128, 20480, 105, 8, 35, 8 * nodes, 1920});
    std::printf("%d nodes: ours %.0f TFLOP/s a GPU, MT-NLG %.0f (%+.1f %%)\n", nodes, ours,
                paper[i], 100 * (ours / paper[i] - 1));
    EXPECT_GT(ours, paper[i]) << nodes << " nodes";
    EXPECT_LT(ours, paper[i] * 163 / 126) << nodes << " nodes";
    EXPECT_LT(ours, previous) << nodes << " nodes";
    previous = ours;
  }
}

// Narayanan et al. 2021, Table 2: PTD-P (Megatron's layouts, t 8, one sequence a micro-batch)
// against ZeRO-3 without model parallelism (DeepSpeed's), teraFLOP/s a GPU at a fixed global batch
// as the GPUs double. Nothing was fitted to it.
// - PTD-P, 175B at t 8 p 12 (batch 1536) and 530B at t 8 p 35 (batch 2240): each row within 5 %
//   (2026-11-27: +1.7, +0.7, -0.7, +0.9, 0.0, -1.2 %).
// - ZeRO-3 is projected as our `fsdp` runs it: one flat all-gather of each block's fp32
//   parameters before its forward and its backward, the next one prefetched under the current
//   block's compute, and its gradients reduce-scattered (here in bf16, as DeepSpeed reduced
//   them in fp16). DeepSpeed's ZeRO-3 of 2021 took 66 s a step at 768 GPUs and at 1536 alike:
//   bound by its communication at about 16 GB/s a GPU of bus traffic, where the link model gives
//   a 384-rank all-gather 109. Ours projects faster at every row and, as the paper's, falls as the
//   GPUs double at a fixed batch: each GPU's compute halves with its micro-batch, its
//   communication does not, until the compute no longer hides it.
// - The 530B model in ZeRO-3 with four sequences a micro-batch does not fit on 560 GPUs' 80 GB, as
//   the paper found (it ran 640 with a larger batch).
TEST(MegatronTables, NarayananTable2PtdpRowsAndZero3FallingAtAFixedBatch) {
  struct Row {
    int gpus;
    double paper;
  };
  // PTD-P: every replica's micro-batches, one sequence each.
  const auto ptdp = [](int layers, int hidden, int heads, int p, int batch, const Row& r) {
    return projected_tflops({heads, hidden, layers, 8, p, r.gpus, batch});
  };
  for (const Row& r : {Row{384, 153}, Row{768, 149}, Row{1536, 141}}) {
    const double ours = ptdp(96, 12288, 96, 12, 1536, r);
    std::printf("PTD-P 175B on %d GPUs: ours %.1f, paper %.0f (%+.1f %%)\n", r.gpus, ours, r.paper,
                100 * (ours / r.paper - 1));
    EXPECT_NEAR(ours / r.paper, 1, 0.05) << "175B on " << r.gpus;
  }
  for (const Row& r : {Row{560, 171}, Row{1120, 167}, Row{2240, 159}}) {
    const double ours = ptdp(105, 20480, 128, 35, 2240, r);
    std::printf("PTD-P 530B on %d GPUs: ours %.1f, paper %.0f (%+.1f %%)\n", r.gpus, ours, r.paper,
                100 * (ours / r.paper - 1));
    EXPECT_NEAR(ours / r.paper, 1, 0.05) << "530B on " << r.gpus;
  }
  const auto zero3 = [](int gpus, int batch, int layers, int hidden, int heads) {
    const test::CliResult out = cli(megatron_22b({{"--nodes", std::to_string(gpus / 8)},
                                                  {"--strategy", "fsdp"},
                                                  {"--tp", ""},
                                                  {"--world", std::to_string(gpus)},
                                                  {"--layers", std::to_string(layers)},
                                                  {"--d-model", std::to_string(hidden)},
                                                  {"--heads", std::to_string(heads)},
                                                  {"--global-batch", std::to_string(batch)},
                                                  {"--attention", "unfused"},
                                                  {"--clip-grad-norm", "1"},
                                                  {"--reduce-dtype", "bf16"}},
                                                 {"--activation-checkpointing", "--json"}));
    EXPECT_EQ(out.code, 0) << out.err;
    return out.code == 0 ? nlohmann::json::parse(out.out) : nlohmann::json();
  };
  const auto tflops = [](const nlohmann::json& j, int gpus, int batch, int layers, double h) {
    const double s = 2048, V = 51200, l = layers;
    return 96 * batch * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h)) /
           (j.at("step_s").get<double>() * gpus) / 1e12;
  };
  double previous = 1e9, exposed_at_384 = 0;
  for (const Row& r : {Row{384, 144}, Row{768, 88}, Row{1536, 44}}) {
    const nlohmann::json j = zero3(r.gpus, 1536, 96, 12288, 96);
    if (j.is_null()) return;
    const double ours = tflops(j, r.gpus, 1536, 96, 12288);
    const double exposed =
        j.at("breakdown_s").at("data_comm").get<double>() / j.at("step_s").get<double>();
    std::printf(
        "ZeRO-3 175B on %d GPUs: ours %.1f (communication %.0f %% of the step), "
        "DeepSpeed's %.0f\n",
        r.gpus, ours, 100 * exposed, r.paper);
    EXPECT_GT(ours, r.paper) << r.gpus;
    EXPECT_LT(ours, previous) << r.gpus;
    EXPECT_TRUE(j.at("fits").get<bool>()) << r.gpus;
    previous = ours;
    if (r.gpus == 384) exposed_at_384 = exposed;
    if (r.gpus == 1536) {
      EXPECT_GT(exposed, 5 * exposed_at_384);
    }
  }
  EXPECT_FALSE(zero3(560, 2240, 105, 20480, 128).at("fits").get<bool>());
}

}  // namespace
}  // namespace shardscope
