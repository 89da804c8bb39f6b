// `project` of MosaicML's published FSDP runs (llm-foundry, scripts/train/benchmarking/README.md,
// "MPT Training Benchmarks"): GPT-style MPT models from 125M to 70B parameters, trained with
// PyTorch's FSDP (FULL_SHARD, ZeRO-3) in bf16 on A100 80GB and H100 80GB nodes, measured. A table
// issue 34 does not name, and nothing was fitted to it: the rates are the profiles' own.
//
// What it shows (2026-11-27, ours / measured MFU): our projection is never slower than what ran.
// - A100 with full recompute: 1.04-1.18 (30B, 13B, 7B on 8 GPUs; 70B on 32 and 64).
// - A100 without recompute: 1.23-1.41, the more the smaller the model (125M 1.41, 7B 1.23).
// - H100: 1.10-1.58 (1.10-1.61 until 2026-11-28, before the compute and FSDP's collectives beside
//   it ran at the paces an H100 measured). Those runs used 2023's H100 software, and their MFU is
//   below the A100's.
// We price every kernel at the rate measured for it alone, in short bursts, on a GPU's best
// shapes: a bound on speed the runs did not reach, least far with full recompute, the GEMM-heavy
// case. Where the model grows, or the GPUs double, the projection moves as the runs did.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.h"

namespace shardscope {
namespace {

using test::cli;

// One MPT configuration of llm-foundry's yamls: learned positions, tied embeddings, MLP ratio 4.
struct Mpt {
  const char* name;
  int d_model, heads, layers;
};
constexpr Mpt k125m{"125m", 768, 12, 12}, k350m{"350m", 1024, 16, 24}, k760m{"760m", 1536, 12, 24},
    k1b{"1b", 2048, 16, 24}, k3b{"3b", 2560, 20, 32}, k7b{"7b", 4096, 32, 32},
    k13b{"13b", 5120, 40, 40}, k30b{"30b", 7168, 56, 48}, k70b{"70b", 8192, 64, 80};
constexpr int kVocab = 50368;

// A row of the table: the model, its sequence length, GPUs, micro-batch (sequences a GPU), gradient
// accumulation, whether activations were checkpointed, and the MFU it measured (%).
struct Row {
  Mpt model;
  int seq, gpus, micro_batch, accumulation;
  bool recompute;
  double mfu;
};

// Our MFU of the row by the table's own count: 6 FLOPs a parameter a token plus attention's
// 12·l·h·s, at the profile's bf16 peak (312 TFLOP/s on an A100, 989 on an H100).
double projected_mfu(const char* hardware, double peak_tflops, const Row& r) {
  const Mpt& m = r.model;
  std::vector<std::string> args = {"project",
                                   "--hardware",
                                   hardware,
                                   "--nodes",
                                   std::to_string(r.gpus / 8),
                                   "--strategy",
                                   "fsdp",
                                   "--world",
                                   std::to_string(r.gpus),
                                   "--layers",
                                   std::to_string(m.layers),
                                   "--d-model",
                                   std::to_string(m.d_model),
                                   "--heads",
                                   std::to_string(m.heads),
                                   "--seq",
                                   std::to_string(r.seq),
                                   "--vocab",
                                   std::to_string(kVocab),
                                   "--mlp-ratio",
                                   "4",
                                   "--tie-embeddings",
                                   "--global-batch",
                                   std::to_string(r.micro_batch * r.accumulation * r.gpus),
                                   "--grad-accum",
                                   std::to_string(r.accumulation),
                                   "--precision",
                                   "bf16",
                                   "--json"};
  if (r.recompute) args.push_back("--activation-checkpointing");
  const test::CliResult out = cli(args);
  EXPECT_EQ(out.code, 0) << m.name << ": " << out.err;
  if (out.code != 0) return 0;
  const double step = nlohmann::json::parse(out.out).at("step_s");
  const double h = m.d_model, l = m.layers, s = r.seq;
  const double params = 12 * l * h * h + (kVocab + s) * h;
  const double tokens = double(r.micro_batch) * r.accumulation * r.gpus * s;
  const double flops = tokens * (6 * params + 12 * l * h * s);
  const double mfu = 100 * flops / (step * r.gpus * peak_tflops * 1e12);
  std::printf("%s %s s %d on %d GPUs (%d x %d%s): ours %.1f %%, measured %.1f %% (x%.2f)\n",
              hardware, m.name, r.seq, r.gpus, r.micro_batch, r.accumulation,
              r.recompute ? ", recompute" : "", mfu, r.mfu, mfu / r.mfu);
  return mfu;
}

// A100 80GB, "with 1600 Gbps node-node interconnect (RoCE)": 8 x 200 Gb/s a node, as 8xA100's
// Selene network.
const std::vector<Row> kA100Recompute = {
    {k30b, 2048, 8, 3, 21, true, 55.30}, {k30b, 1024, 8, 6, 21, true, 55.82},
    {k13b, 4096, 8, 10, 3, true, 57.62}, {k13b, 1024, 8, 40, 3, true, 59.48},
    {k7b, 4096, 8, 16, 2, true, 54.84},  {k7b, 1024, 8, 64, 2, true, 58.01},
    {k70b, 2048, 64, 8, 4, true, 53.33}, {k70b, 2048, 32, 2, 16, true, 48.56},
};
// The A100's 2048-token column without recompute, smallest model first.
const std::vector<Row> kA100BySize = {
    {k125m, 2048, 8, 40, 2, false, 44.79}, {k350m, 2048, 8, 32, 2, false, 51.62},
    {k760m, 2048, 8, 24, 2, false, 56.85}, {k1b, 2048, 8, 14, 4, false, 59.86},
    {k3b, 2048, 8, 10, 2, false, 62.11},   {k7b, 2048, 8, 6, 2, false, 64.23},
};
const std::vector<Row> kH100 = {
    {k30b, 2048, 8, 3, 21, true, 38.11}, {k13b, 2048, 8, 2, 1, false, 39.79},
    {k7b, 2048, 8, 6, 1, false, 46.44},  {k7b, 4096, 8, 16, 2, true, 40.42},
    {k1b, 2048, 8, 14, 1, false, 41.82}, {k760m, 2048, 8, 24, 2, false, 34.90},
    {k70b, 2048, 64, 8, 4, true, 42.57}, {k13b, 2048, 64, 2, 1, false, 39.86},
};

TEST(MosaicTables, FsdpWithFullRecomputeOnA100sWithinTwentyPercentAndNeverSlowerThanProjected) {
  double at_64 = 0, at_32 = 0;
  for (const Row& r : kA100Recompute) {
    const double ours = projected_mfu("8xA100", 312, r);
    EXPECT_GE(ours, r.mfu) << r.model.name << " on " << r.gpus;
    EXPECT_LT(ours, 1.2 * r.mfu) << r.model.name << " on " << r.gpus;
    if (r.model.layers == 80) (r.gpus == 64 ? at_64 : at_32) = ours;
  }
  // 70B from 64 GPUs to 32, a quarter of the micro-batch: the run lost 9 % of its MFU.
  EXPECT_NEAR(at_32 / at_64, 48.56 / 53.33, 0.03);
}

TEST(MosaicTables, FsdpMfuRisesWithTheModelAsMeasuredAndNoRunBeatsTheProjection) {
  double previous = 0;
  for (const Row& r : kA100BySize) {
    const double ours = projected_mfu("8xA100", 312, r);
    EXPECT_GT(ours, previous) << r.model.name;
    EXPECT_GE(ours, r.mfu) << r.model.name;
    previous = ours;
  }
  for (const Row& r : kH100) {
    const double ours = projected_mfu("8xH100", 989, r);
    EXPECT_GE(ours, r.mfu) << r.model.name << " on " << r.gpus;
  }
}

}  // namespace
}  // namespace shardscope
