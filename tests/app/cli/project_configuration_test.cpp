// `project` of a configuration that is never run (issue 34): one step priced kernel by kernel on
// a GPU profile, with its breakdown, MFU and memory, a trace the other commands open, and bad
// configurations refused naming the flag.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "app/analysis/configuration_projection.h"
#include "engine/train/config.h"
#include "profiling/projection/collective_model.h"
#include "profiling/projection/hardware_profile.h"
#include "tests/support/cli_runner.h"
#include "tests/support/megatron_flags.h"
#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

using test::cli;
using test::mean;
using test::megatron_22b;

TEST(ProjectConfiguration, PrintsTheStepMfuAndMemoryAndItsPartsAddUp) {
  const test::CliResult r = cli(megatron_22b({}, {"--json"}));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const double step = j.at("step_s");
  const auto& parts = j.at("breakdown_s");
  double sum = 0;
  for (const auto& [name, seconds] : parts.items()) sum += seconds.get<double>();
  EXPECT_NEAR(sum, step, 1e-9 * step);
  // MFU is Megatron's model FLOPs over the step, the GPUs and their peak.
  const double flops =
      72.0 * 4 * 2048 * 48 * 6144.0 * 6144 * (1 + 2048 / (6.0 * 6144) + 51200 / (12.0 * 48 * 6144));
  EXPECT_NEAR(j.at("mfu").get<double>(), flops / (step * 8 * 312e12), 1e-12);
  EXPECT_GT(j.at("peak_bytes").get<double>(), 0);
  // Full recompute runs every block's forward twice: a slower step, fewer saved activations.
  const auto full =
      nlohmann::json::parse(cli(megatron_22b({}, {"--json", "--activation-checkpointing"})).out);
  EXPECT_GT(full.at("step_s").get<double>(), step);
  EXPECT_LT(full.at("memory_bytes").at("activations").get<double>(),
            j.at("memory_bytes").at("activations").get<double>());
}

// The shipped 8xA100 profile without its host costs (a copy in the test's directory), so that a
// kernel's bytes alone decide its time.
std::string a100_without_host_costs() {
  nlohmann::json profile;
  {
    std::ifstream in(profiling::hardware_profile_directory() + "/8xA100.json");
    in >> profile;
  }
  profile["gpu"].erase("host");
  profile["gpu"].erase("dispatch_us");
  const std::string path = (test::test_temp_dir() / "8xA100-no-host.json").string();
  std::ofstream(path) << profile.dump(2);
  return path;
}

// --clip-grad-norm, priced as each strategy clips (strategies/sharded/flat_shard.cpp, LibTorch's
// clip_grad_norm_): the extra optimizer time of 22B on 8 A100s, on a profile without host
// costs, so the bytes decide. A tensor-parallel rank casts its 1/8 of the gradients to fp64,
// squares, sums and scales them (44 bytes a parameter); zero2's ranks clip their 1/8 shards the
// same way; ddp_bucketed's replicas take LibTorch's norm and scale over all of them (12 bytes a
// parameter).
TEST(ProjectConfiguration, ClippingReadsEveryGradientBeforeTheStep) {
  auto extra = [](const std::string& strategy, const std::string& tp) {
    // Eight sequences, so that eight data-parallel ranks take one each.
    std::map<std::string, std::string> flags = {{"--strategy", strategy},
                                                {"--tp", tp},
                                                {"--global-batch", "8"},
                                                {"--hardware", a100_without_host_costs()}};
    const test::CliResult plain = cli(megatron_22b(flags, {"--json"}));
    const test::CliResult clipped = cli(megatron_22b(flags, {"--json", "--clip-grad-norm", "1"}));
    EXPECT_EQ(clipped.code, 0) << strategy << ": " << clipped.err;
    if (plain.code != 0 || clipped.code != 0) return std::pair{0.0, 0.0};
    const auto a = nlohmann::json::parse(plain.out), b = nlohmann::json::parse(clipped.out);
    EXPECT_NEAR(b.at("step_s").get<double>() - a.at("step_s").get<double>(),
                b.at("breakdown_s").at("optimizer").get<double>() -
                    a.at("breakdown_s").at("optimizer").get<double>(),
                1e-9);
    // fp32 weights, 4 bytes a parameter, before ZeRO divides them.
    return std::pair{b.at("breakdown_s").at("optimizer").get<double>() -
                         a.at("breakdown_s").at("optimizer").get<double>(),
                     a.at("memory_bytes").at("parameters").get<double>() / 4};
  };
  const auto [tp, tp_parameters] = extra("tp", "8");
  ASSERT_NEAR(tp_parameters, 22e9 / 8, 0.1 * 22e9 / 8);
  // At HBM's peak (2.04 TB/s) at best, at the profile's measured 1.80 TB/s as priced.
  EXPECT_GT(tp, 44 * tp_parameters / 2.039e12);
  EXPECT_NEAR(tp, 44 * tp_parameters / 1.80e12, 0.05 * tp);
  const auto [zero2, zero2_parameters] = extra("zero2", "");
  EXPECT_NEAR(zero2_parameters, 8 * tp_parameters, 0.1 * 8 * tp_parameters);
  EXPECT_NEAR(zero2, 44 * zero2_parameters / 8 / 1.80e12, 0.05 * zero2);
  const auto [ddp, ddp_parameters] = extra("ddp_bucketed", "");
  EXPECT_NEAR(ddp, 12 * ddp_parameters / 1.80e12, 0.05 * ddp);
}

// Korthikanti et al. 2022, Table 5 (A100 80 GB, t 8): one step of each model, full recompute and
// selective recompute with sequence parallelism, in seconds. Each cell's relative error, ours
// against the paper's, with `kernel` as every block's attention. The full column adds
// --activation-checkpointing; the selective one --sequence-parallel, and with unfused attention
// --selective-recompute (SDPA saves no score matrix, so our run without recompute is already
// what selective recompute saves). Nothing is fitted: the rates come from the A100 profile's
// measured sources.
std::vector<double> table5_errors(const std::string& kernel) {
  struct Row {
    const char* model;
    int layers, d_model, heads, pp, gpus, global_batch, micro_batches, stages_per_rank;
    double full_s, selective_s;
  };
  const Row rows[] = {{"22B", 48, 6144, 64, 1, 8, 4, 1, 1, 1.42, 1.10},
                      {"175B", 96, 12288, 96, 8, 64, 64, 64, 3, 18.13, 13.75},
                      {"530B", 105, 20480, 128, 35, 280, 280, 280, 3, 49.05, 37.83},
                      {"1T", 128, 25600, 160, 64, 512, 512, 512, 1, 94.42, 71.49}};
  std::vector<double> errors;
  for (const Row& r : rows) {
    for (const bool full : {true, false}) {
      // The 22B row's flags, with this row's shape, layout and batch.
      std::map<std::string, std::string> flags = {
          {"--nodes", std::to_string(r.gpus / 8)},
          {"--strategy", r.pp > 1 ? "hybrid" : "tp"},
          {"--world", std::to_string(r.gpus)},
          {"--layers", std::to_string(r.layers)},
          {"--d-model", std::to_string(r.d_model)},
          {"--heads", std::to_string(r.heads)},
          {"--global-batch", std::to_string(r.global_batch)},
          {"--micro-batches", std::to_string(r.micro_batches)},
          {"--attention", kernel}};
      if (r.pp > 1) {
        flags["--pp"] = std::to_string(r.pp);
        flags["--schedule"] = r.stages_per_rank > 1 ? "interleaved-1f1b" : "1f1b";
        if (r.stages_per_rank > 1) flags["--stages-per-rank"] = std::to_string(r.stages_per_rank);
      }
      std::vector<std::string> args = megatron_22b(flags, {"--json"});
      args.push_back(full ? "--activation-checkpointing" : "--sequence-parallel");
      if (kernel == "unfused") {
        // The paper's configuration: its attention, selective recompute in the SP column, and
        // Megatron-LM's default gradient clipping (--clip-grad 1.0).
        if (!full) args.push_back("--selective-recompute");
        args.insert(args.end(), {"--clip-grad-norm", "1"});
      }
      const test::CliResult out = cli(args);
      EXPECT_EQ(out.code, 0) << r.model << ": " << out.err;
      if (out.code != 0) return {};
      const double ours = nlohmann::json::parse(out.out).at("step_s");
      const double paper = full ? r.full_s : r.selective_s;
      errors.push_back(std::abs(ours / paper - 1));
      std::printf("%s %s %s: ours %.3f s, paper %.2f s (%+.1f %%)\n", kernel.c_str(), r.model,
                  full ? "full" : "selective + SP", ours, paper, 100 * (ours / paper - 1));
    }
  }
  return errors;
}

// An A100, and an H100 PCIe, are slower than an H100 SXM at every rate (GEMMs, HBM, kernel
// turnaround), and an H200 at least as fast at each. So, on the same host, no model steps faster on
// a slower GPU or slower on a faster one, however small, and the same H100 steps alike in one node
// or two; a small GPT at world 1 is bound by the host and takes about as long on each. The A100
// and PCIe profiles take the H100 machine's host; the H200's was measured on its own machine, so
// it is compared on the H100's host here.
TEST(ProjectConfiguration, AGpuSlowerAtEveryRateIsNeverProjectedFaster) {
  auto step = [](const std::string& hardware, const std::string& preset) {
    const test::CliResult out =
        cli({"project", "--hardware", hardware, "--strategy", "single", "--world", "1", "--preset",
             preset, "--precision", "bf16", "--json"});
    EXPECT_EQ(out.code, 0) << hardware << " " << preset << ": " << out.err;
    return out.code == 0 ? nlohmann::json::parse(out.out).at("step_s").get<double>() : 0.0;
  };
  auto profile = [](const std::string& name) {
    std::ifstream in(profiling::hardware_profile_directory() + "/" + name + ".json");
    return nlohmann::json::parse(in);
  };
  nlohmann::json h200_on_h100_host = profile("8xH200");
  const nlohmann::json h100_profile = profile("8xH100");
  EXPECT_NE(h200_on_h100_host["gpu"]["host"], h100_profile["gpu"]["host"]);
  h200_on_h100_host["gpu"]["host"] = h100_profile["gpu"]["host"];
  h200_on_h100_host["gpu"]["dispatch_us"] = h100_profile["gpu"]["dispatch_us"];
  const std::string h200_path = (test::test_temp_dir() / "h200-on-h100-host.json").string();
  std::ofstream(h200_path) << h200_on_h100_host.dump();
  for (const char* preset : {"tiny", "small", "gpt2-small", "megatron-22b"}) {
    const double a100 = step("8xA100", preset), pcie = step("8xH100-PCIe", preset),
                 h100 = step("8xH100", preset), h200 = step(h200_path, preset),
                 two_nodes = step("2x8xH100-IB", preset);
    std::printf(
        "%s: A100 %.3f ms, H100 PCIe %.3f ms, H100 SXM %.3f ms (%.3f in 2x8xH100-IB), "
        "H200 on the H100's host %.3f ms\n",
        preset, a100 * 1e3, pcie * 1e3, h100 * 1e3, two_nodes * 1e3, h200 * 1e3);
    EXPECT_GE(a100, h100) << preset;
    EXPECT_GE(pcie, h100) << preset;
    EXPECT_LE(h200, h100) << preset;
    EXPECT_DOUBLE_EQ(two_nodes, h100) << preset;
  }
}

// With SDPA, what our GPT runs by default, the bar (10 % a row, 5 % on average) is not met:
// 22B's rows are fast, since a flash kernel replaces the score matrix, softmax and dropout the
// paper's runs paid for (docs/device-time-and-projection.md). This holds what is reached, a
// quarter a row and a tenth on average, so that no change slips back unseen.
TEST(ProjectConfiguration, KorthikantiTable5RowsStayWithinAQuarterOfThePaper) {
  const std::vector<double> errors = table5_errors("sdpa");
  ASSERT_EQ(errors.size(), 8u);
  for (double error : errors) EXPECT_LT(error, 0.25);
  EXPECT_LT(mean(errors), 0.10);
}

// In the paper's configuration (its attention: scores materialised, a softmax, selective recompute
// of them; gradients clipped to norm 1.0, Megatron-LM's default), each cell comes within the
// issue's 10 % and the eight within 5 % on average (2026-11-27: mean 3.7 %, largest +9.1 %).
TEST(ProjectConfiguration, KorthikantiTable5InThePapersConfigurationMeetsTheBar) {
  const std::vector<double> errors = table5_errors("unfused");
  ASSERT_EQ(errors.size(), 8u);
  for (double error : errors) EXPECT_LT(error, 0.10);
  EXPECT_LT(mean(errors), 0.05);
}

// Korthikanti et al. 2022, Table 4: one 22B layer at t 8, forward and backward in ms. With SDPA,
// selective recompute is our run without checkpointing (SDPA saves no score matrix), full
// recompute is --activation-checkpointing; 3 of the 6 figures meet the 10 % bar (the forwards are
// 14-19 % fast: docs/device-time-and-projection.md says why). This holds what is reached. With
// unfused attention, all five of the paper's columns, the two that store the scores included,
// are held to 10 %.
TEST(ProjectConfiguration, KorthikantiTable4LayerTimesStayWithinAQuarterOfThePaper) {
  struct Case {
    const char* name;
    std::vector<std::string> flags;
    double forward_ms, backward_ms, bar;
  };
  const std::vector<std::string> unfused = {"--attention", "unfused"};
  auto with = [&](std::vector<std::string> flags) {
    flags.insert(flags.end(), unfused.begin(), unfused.end());
    return flags;
  };
  const Case cases[] = {
      {"selective", {}, 7.7, 13.2, 0.25},
      {"selective + SP", {"--sequence-parallel"}, 7.2, 13.1, 0.25},
      {"full recompute", {"--activation-checkpointing"}, 7.7, 19.5, 0.25},
      {"unfused: baseline", with({}), 7.7, 11.9, 0.10},
      {"unfused: SP", with({"--sequence-parallel"}), 7.2, 11.8, 0.10},
      {"unfused: selective", with({"--selective-recompute"}), 7.7, 13.2, 0.10},
      {"unfused: selective + SP", with({"--selective-recompute", "--sequence-parallel"}), 7.2, 13.1,
       0.10},
      {"unfused: full recompute", with({"--activation-checkpointing"}), 7.7, 19.5, 0.10}};
  for (const Case& c : cases) {
    std::vector<std::string> extra = c.flags;
    extra.push_back("--json");
    const test::CliResult out = cli(megatron_22b({}, extra));
    ASSERT_EQ(out.code, 0) << c.name << ": " << out.err;
    const auto j = nlohmann::json::parse(out.out);
    const double forward_ms = j.at("layer_forward_s").get<double>() * 1e3;
    const double backward_ms = j.at("layer_backward_s").get<double>() * 1e3;
    std::printf("%s: forward %.2f ms (paper %.1f), backward %.2f ms (paper %.1f)\n", c.name,
                forward_ms, c.forward_ms, backward_ms, c.backward_ms);
    EXPECT_NEAR(forward_ms / c.forward_ms, 1.0, c.bar) << c.name << " forward " << forward_ms;
    EXPECT_NEAR(backward_ms / c.backward_ms, 1.0, c.bar) << c.name << " backward " << backward_ms;
  }
}

// --grad-accum g runs a pipeline's schedule g times a step, one accumulation pass after the
// other, as the runtime does (not one flush of g times the micro-batches): with activation
// checkpointing, which casts the weights in every forward, the second pass adds exactly what the
// first took. Without it the weights' bf16 copies are made once a step, in the first pass only.
TEST(ProjectConfiguration, APipelinesAccumulationPassesRunOneAfterTheOther) {
  const auto project = [](int accumulation, bool checkpointing) {
    std::vector<std::string> extra = {"--json", "--grad-accum", std::to_string(accumulation)};
    if (checkpointing) extra.push_back("--activation-checkpointing");
    const test::CliResult out =
        cli(megatron_22b({{"--strategy", "hybrid"},
                          {"--tp", "4"},
                          {"--pp", "2"},
                          {"--micro-batches", "4"},
                          {"--global-batch", std::to_string(4 * accumulation)}},
                         extra));
    EXPECT_EQ(out.code, 0) << out.err;
    return out.code == 0 ? nlohmann::json::parse(out.out) : nlohmann::json::object();
  };
  const auto one_pass = [](const nlohmann::json& p) {
    return p.at("step_s").get<double>() - p.at("breakdown_s").at("optimizer").get<double>() -
           p.at("breakdown_s").at("data_comm").get<double>();
  };
  const nlohmann::json a1 = project(1, true), a2 = project(2, true);
  ASSERT_FALSE(a1.empty() || a2.empty());
  EXPECT_EQ(a2.at("layout").at("accumulation_passes"), 2);
  EXPECT_EQ(a2.at("layout").at("micro_batch_sequences"),
            a1.at("layout").at("micro_batch_sequences"));
  EXPECT_NEAR(one_pass(a2), 2 * one_pass(a1), 1e-9 * one_pass(a1));
  const nlohmann::json b1 = project(1, false), b2 = project(2, false);
  ASSERT_FALSE(b1.empty() || b2.empty());
  EXPECT_GT(b1.at("weight_casts_s").get<double>(), 0);
  EXPECT_EQ(b2.at("weight_casts_s"), b1.at("weight_casts_s"));
  EXPECT_LT(one_pass(b2), 2 * one_pass(b1));
  EXPECT_GT(one_pass(b2), 2 * one_pass(b1) - 4 * b1.at("weight_casts_s").get<double>());
}

TEST(ProjectConfiguration, APipelinesTraceOpensInReportWithItsBubble) {
  const auto dir = test::test_temp_dir();
  const std::string trace = (dir / "p.sst").string();
  const test::CliResult r =
      cli({"project", "--hardware",      "8xA100", "--nodes",     "2",     "--strategy",
           "hybrid",  "--world",         "16",     "--tp",        "4",     "--pp",
           "4",       "--layers",        "16",     "--d-model",   "2048",  "--heads",
           "16",      "--seq",           "1024",   "--vocab",     "32000", "--global-batch",
           "16",      "--micro-batches", "8",      "--precision", "bf16",  "--out",
           trace});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("pipeline bubble"), std::string::npos) << r.out;
  const test::CliResult report = cli({"report", trace});
  ASSERT_EQ(report.code, 0) << report.err;
  EXPECT_NE(report.out.find("projected onto 8xA100"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("4 ranks"), std::string::npos) << report.out;
}

// The data-parallel strategies' communication as each runs it: DDP's buckets reduced during
// backward leave less behind than after it; ZeRO-1 then broadcasts what each rank stepped, ZeRO-2
// all-gathers it; FSDP's prefetch hides gathers that it waits for without. Before, ZeRO-3 priced
// an all-reduce of the whole model times the ranks (22B on one node: 7.6 s of communication).
TEST(ProjectConfiguration, DataParallelCommunicationIsWhatEachStrategyLeavesExposed) {
  const auto comm = [](const std::string& strategy, const std::vector<std::string>& extra) {
    std::vector<std::string> flags = extra;
    flags.push_back("--json");
    const test::CliResult r =
        cli(megatron_22b({{"--strategy", strategy}, {"--tp", ""}, {"--global-batch", "8"}}, flags));
    EXPECT_EQ(r.code, 0) << strategy << ": " << r.err;
    return r.code == 0
               ? nlohmann::json::parse(r.out).at("breakdown_s").at("data_comm").get<double>()
               : 0.0;
  };
  const double overlapped = comm("ddp_bucketed", {}),
               after = comm("ddp_bucketed", {"--no-overlap"});
  EXPECT_GT(overlapped, 0);
  EXPECT_LT(overlapped, 0.5 * after);
  // DDP's Reducer starts with a bucket of 1 MiB: the rest as ddp_bucketed's.
  EXPECT_NEAR(comm("torch_ddp", {}), overlapped, 0.05 * overlapped);
  // After backward, the buckets' all-reduces one after another. A bucket is whole tensors
  // (strategies/data_parallel/bucket_plan.cpp) and each of 22B's large ones (h = 6144) passes
  // DDP's 25 MiB alone: per block qkv, the attention projection, fc and the MLP projection; the
  // embeddings and the LM head; the small ones ride with them.
  const auto hw = profiling::load_hardware_profile("8xA100");
  const auto all_reduce = [&](double elements) {
    return profiling::estimate_collective("all_reduce", int64_t(4 * elements), 8, hw).time_s;
  };
  const double h = 6144;
  const double buckets =
      48 * (all_reduce(3 * h * h) + all_reduce(h * h) + 2 * all_reduce(4 * h * h)) +
      all_reduce(51200 * h) + all_reduce(2048 * h) + all_reduce(51200 * h);
  EXPECT_NEAR(after, buckets, 0.02 * buckets);
  // ZeRO-1: the same sync, then each owner's broadcast of the fp32 parameters it stepped.
  const double broadcast =
      8 * profiling::estimate_collective("broadcast", int64_t(22e9 * 4 / 8), 8, hw).time_s;
  EXPECT_NEAR(comm("zero1", {}) - overlapped, broadcast, 0.1 * broadcast);
  // ZeRO-3 without prefetch: two gathers and a reduce-scatter of every unit, in series.
  const double serial =
      2 * profiling::estimate_collective("all_gather_into", int64_t(22e9 * 4), 8, hw).time_s +
      profiling::estimate_collective("reduce_scatter_tensor", int64_t(22e9 * 4), 8, hw).time_s;
  const double fsdp = comm("fsdp", {}), fsdp_serial = comm("fsdp", {"--no-prefetch"});
  EXPECT_NEAR(fsdp_serial, serial, 0.1 * serial);
  EXPECT_LT(fsdp, 0.2 * fsdp_serial);
}

// Every strategy projects: context parallelism (its ring in fp32, which a GPU without an fp32
// rate cannot price) and expert parallelism (its all_to_all over the expert group) too.
TEST(ProjectConfiguration, ContextAndExpertParallelismProject) {
  const auto projected = [](const std::vector<std::string>& args) {
    const test::CliResult r = cli(args);
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    return nlohmann::json::parse(r.out);
  };
  const nlohmann::json cp = projected(megatron_22b(
      {{"--strategy", "cp"}, {"--tp", ""}, {"--cp", "8"}, {"--global-batch", "8"}}, {"--json"}));
  EXPECT_EQ(cp["layout"]["cp"], 8);
  EXPECT_GT(cp["step_s"].get<double>(), 0);
  const nlohmann::json ep =
      projected(megatron_22b({{"--strategy", "ep"}, {"--tp", ""}, {"--global-batch", "8"}},
                             {"--experts", "8", "--top-k", "2", "--json"}));
  EXPECT_EQ(ep["layout"]["ep"], 8);
  EXPECT_GT(ep["breakdown_s"]["tensor_comm"].get<double>(), 0);  // the all_to_alls
  Config config = config_from_json(nlohmann::json{{"strategy", "cp"},
                                                  {"world", 2},
                                                  {"preset", "tiny"},
                                                  {"strategy_options", {{"precision", "bf16"}}}});
  finalize(config);
  auto hw = profiling::load_hardware_profile("8xH100");
  // The projected timeline names what its passes wait for: the ring's transfers, the experts'
  // all_to_all, not a tensor group that is not there.
  const auto waited_for = [&](const Config& c) {
    const profiling::Trace t = analysis::project_configuration(c, hw, 1).trace;
    std::set<std::string> names;
    for (const auto& e : t.ranks.at(0).events)
      if (e.category == profiling::Category::kCollective) names.insert(t.str(e.name));
    return names;
  };
  EXPECT_EQ(waited_for(config), std::set<std::string>{"ring attention transfers"});
  Config experts = config_from_json(nlohmann::json{{"strategy", "ddp_bucketed"},
                                                   {"world", 2},
                                                   {"preset", "tiny"},
                                                   {"model", {{"experts", 4}, {"top_k", 2}}},
                                                   {"strategy_options", {{"precision", "bf16"}}}});
  experts.strategy = "ep";
  EXPECT_EQ(waited_for(experts), std::set<std::string>{"expert all_to_all"});
  hw.gpu.fp32_tflops = 0;
  try {
    analysis::project_configuration(config, hw, 1);
    ADD_FAILURE() << "priced a ring without an fp32 rate";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("fp32_tflops"), std::string::npos) << e.what();
  }
}

// One collective over several nodes: --nodes adds them to the profile as a configuration's
// projection does (before, --collective ignored it and refused more ranks than one node has).
TEST(ProjectConfiguration, OneCollectiveSpansTheNodesItIsGiven) {
  const test::CliResult r = cli({"project", "--hardware", "8xA100", "--nodes", "2", "--collective",
                                 "all_gather_into", "--bytes", "1GiB", "--ranks", "16"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("hierarchical"), std::string::npos) << r.out;
  const test::CliResult pcie = cli({"project", "--hardware", "8xH100-PCIe", "--nodes", "2",
                                    "--collective", "all_reduce", "--ranks", "16"});
  EXPECT_EQ(pcie.code, 2);
  EXPECT_NE(pcie.err.find("no link between nodes"), std::string::npos) << pcie.err;
}

// A step of half a million micro-batches is projected, but its timeline (ZeRO-3's collectives,
// each micro-batch) would be gigabytes: --out refuses, naming itself, and writes nothing.
TEST(ProjectConfiguration, AStepTooLongToDrawIsProjectedButNotDrawn) {
  const std::string out = (test::test_temp_dir() / "too-long.sst").string();
  std::vector<std::string> args = {"project", "--hardware",     "8xA100",  "--world",
                                   "8",       "--preset",       "tiny",    "--strategy",
                                   "fsdp",    "--global-batch", "4194304", "--grad-accum",
                                   "524288",  "--precision",    "bf16"};
  const test::CliResult figures = cli(args);
  ASSERT_EQ(figures.code, 0) << figures.err;
  EXPECT_NE(figures.out.find("step"), std::string::npos);
  args.insert(args.end(), {"--out", out});
  const test::CliResult drawn = cli(args);
  EXPECT_EQ(drawn.code, 2);
  EXPECT_NE(drawn.err.find("--out"), std::string::npos) << drawn.err;
  EXPECT_NE(drawn.err.find("524288 micro-batches"), std::string::npos) << drawn.err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(ProjectConfiguration, WhatCannotBeProjectedIsRefusedNamingTheFlag) {
  auto refused = [](const std::vector<std::string>& args, const std::string& phrase) {
    const test::CliResult r = cli(args);
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find(phrase), std::string::npos) << r.err;
  };
  refused(megatron_22b({{"--precision", "fp32"}}), "--precision");
  refused(megatron_22b({{"--world", "64"}, {"--strategy", "hybrid"}, {"--pp", "8"}}),
          "give --nodes N");
  refused(megatron_22b({{"--hardware", "8xH100-PCIe"}}, {"--nodes", "2"}), "no link between nodes");
  refused(megatron_22b({{"--global-batch", "5"}, {"--world", "16"}}, {"--nodes", "2"}),
          "global-batch");
  refused(megatron_22b({{"--hardware", "cpu-10GbE"}}), "per-kernel rates");
  // What the strategy itself refuses, a run would: cp that does not divide the world, ep without
  // experts or with experts that do not divide over it, a mixture in tp's blocks.
  refused(megatron_22b({{"--strategy", "cp"}, {"--tp", ""}, {"--cp", "3"}}), "--cp");
  refused(megatron_22b({{"--strategy", "ep"}, {"--tp", ""}}), "--experts");
  refused(megatron_22b({{"--strategy", "ep"}, {"--tp", ""}}, {"--experts", "12"}), "--ep");
  refused(megatron_22b({}, {"--experts", "8"}), "--experts");
}

}  // namespace
}  // namespace shardscope
