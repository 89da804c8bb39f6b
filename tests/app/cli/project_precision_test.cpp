// The precision `project` prices a configuration, or a recorded trace's compute, in (issue 34):
// bf16 mixed precision unless told, fp32 where the GPU's fp32 rates were measured, refused
// elsewhere naming the flag.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.h"
#include "tests/support/megatron_flags.h"

namespace shardscope {
namespace {

using test::cli;
using test::megatron_22b;

// GPUs train in bf16 mixed precision, and that is what a projection prices when no --precision is
// given (run's default, fp32, is the CPU's): the same step as with --precision bf16, said so.
TEST(ProjectConfiguration, WithoutPrecisionItProjectsBf16MixedPrecisionAndSaysSo) {
  const test::CliResult left_out = cli(megatron_22b({{"--precision", ""}}, {"--json"}));
  const test::CliResult bf16 = cli(megatron_22b({}, {"--json"}));
  ASSERT_EQ(left_out.code, 0) << left_out.err;
  ASSERT_EQ(bf16.code, 0) << bf16.err;
  EXPECT_EQ(nlohmann::json::parse(left_out.out).at("step_s"),
            nlohmann::json::parse(bf16.out).at("step_s"));
  const test::CliResult text = cli(megatron_22b({{"--precision", ""}}));
  EXPECT_NE(text.out.find("bf16 mixed precision"), std::string::npos) << text.out;
}

// fp32 is priced where the GPU's fp32 GEMMs and attention were measured (8xH100, 8xH200): every
// matmul at the fp32 rate, 15 times below bf16's on an H100, so 22B's step is several times the
// bf16 one, and its activations take twice the bytes. Elsewhere it is refused naming the flag and
// the profile, and so are a mixture of experts and context parallelism in fp32.
TEST(ProjectConfiguration, Fp32IsPricedWhereTheGpuMeasuredIt) {
  const test::CliResult fp32 =
      cli(megatron_22b({{"--hardware", "8xH100"}, {"--precision", "fp32"}}, {"--json"}));
  const test::CliResult bf16 = cli(megatron_22b({{"--hardware", "8xH100"}}, {"--json"}));
  ASSERT_EQ(fp32.code, 0) << fp32.err;
  ASSERT_EQ(bf16.code, 0) << bf16.err;
  const nlohmann::json f = nlohmann::json::parse(fp32.out), b = nlohmann::json::parse(bf16.out);
  EXPECT_EQ(f.at("precision"), "fp32");
  EXPECT_EQ(b.at("precision"), "bf16");
  // No fp32 step computes faster than the fastest fp32 GEMM measured on the GPU, where bf16's
  // did not come near its own bound.
  const double peak_tflops = 989, fp32_gemm_tflops = 54.2;  // 8xH100's bf16 peak; its sweep's
  EXPECT_LT(f.at("mfu").get<double>() * peak_tflops, fp32_gemm_tflops);
  EXPECT_GT(f.at("step_s").get<double>(), 4 * b.at("step_s").get<double>());
  EXPECT_GT(f.at("peak_bytes").get<double>(), b.at("peak_bytes").get<double>());
  const test::CliResult text =
      cli(megatron_22b({{"--hardware", "8xH100"}, {"--precision", "fp32"}}));
  EXPECT_NE(text.out.find("fp32 (no autocast)"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("bf16"), std::string::npos) << text.out;  // no weight copies either

  const test::CliResult a100 = cli(megatron_22b({{"--precision", "fp32"}}));
  EXPECT_EQ(a100.code, 2);
  EXPECT_NE(a100.err.find("--precision"), std::string::npos) << a100.err;
  EXPECT_NE(a100.err.find("8xA100"), std::string::npos) << a100.err;
  const test::CliResult moe = cli(megatron_22b(
      {{"--hardware", "8xH100"}, {"--precision", "fp32"}, {"--strategy", "ep"}, {"--tp", ""}},
      {"--experts", "8"}));
  EXPECT_EQ(moe.code, 2);
  EXPECT_NE(moe.err.find("mixture of experts"), std::string::npos) << moe.err;
  const test::CliResult cp = cli(megatron_22b(
      {{"--hardware", "8xH100"}, {"--precision", "fp32"}, {"--strategy", "cp"}, {"--tp", ""}},
      {"--cp", "2"}));
  EXPECT_EQ(cp.code, 2);
  EXPECT_NE(cp.err.find("fp32 is priced for dense models"), std::string::npos) << cp.err;
}

// A CPU run recorded in fp32 (run's default) replays onto a GPU in bf16, as GPUs train, unless
// told fp32: then its kernels are priced at the fp32 rates the GPU measured, and the replay says
// which it priced and what the run computed in. Its other run flags describe the run the trace
// already is, so they are refused, naming the flag, as is fp32 where it cannot be priced.
TEST(ProjectTrace, PricesItsComputeInTheGivenPrecision) {
  const std::string trace =
      std::string(SHARDSCOPE_SOURCE_DIR) + "/assets/traces/ddp_bucketed-w2.sst";
  const test::CliResult bf16 = cli({"project", trace, "--hardware", "8xH100", "--json"});
  const test::CliResult fp32 =
      cli({"project", trace, "--hardware", "8xH100", "--precision", "fp32", "--json"});
  ASSERT_EQ(bf16.code, 0) << bf16.err;
  ASSERT_EQ(fp32.code, 0) << fp32.err;
  const nlohmann::json b = nlohmann::json::parse(bf16.out), f = nlohmann::json::parse(fp32.out);
  EXPECT_EQ(b.at("precision"), "bf16");
  EXPECT_EQ(f.at("precision"), "fp32");
  EXPECT_EQ(b.at("recorded_precision"), "fp32");
  EXPECT_NE(b.at("compute_model").get<std::string>().find("bf16 kernels"), std::string::npos);
  EXPECT_NE(b.at("compute_model").get<std::string>().find("the run itself computed in fp32"),
            std::string::npos);
  EXPECT_NE(f.at("compute_model").get<std::string>().find("fp32 kernels"), std::string::npos);
  EXPECT_EQ(f.at("compute_model").get<std::string>().find("the run itself"), std::string::npos);

  const test::CliResult a100 =
      cli({"project", trace, "--hardware", "8xA100", "--precision", "fp32"});
  EXPECT_EQ(a100.code, 2);
  EXPECT_NE(a100.err.find("--precision"), std::string::npos) << a100.err;
  EXPECT_NE(a100.err.find("8xA100"), std::string::npos) << a100.err;
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--world", "8"}, {"--freeze", "wte"}, {"--preset", "small"}}) {
    const test::CliResult given = cli({"project", trace, flag, value});
    EXPECT_EQ(given.code, 2) << flag;
    EXPECT_NE(given.err.find(flag), std::string::npos) << given.err;
    EXPECT_NE(given.err.find("as it ran"), std::string::npos) << given.err;
  }
  // `project`'s own flags for other projections, --memory's --fp32 among them.
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--fp32"}, {"--nodes", "2"}, {"--memory"}, {"--search"}}) {
    std::vector<std::string> args = {"project", trace};
    args.insert(args.end(), flags.begin(), flags.end());
    const test::CliResult given = cli(args);
    EXPECT_EQ(given.code, 2) << flags[0];
    EXPECT_NE(given.err.find(flags[0] + " "), std::string::npos) << given.err;
    EXPECT_NE(given.err.find("does not apply to a trace"), std::string::npos) << given.err;
  }
  const test::CliResult scaled =
      cli({"project", trace, "--precision", "fp32", "--compute-scale", "0.01"});
  EXPECT_EQ(scaled.code, 2);
  EXPECT_NE(scaled.err.find("--compute-scale"), std::string::npos) << scaled.err;
  // A profile whose compute is "as measured" prices no kernels, so no precision applies.
  const test::CliResult measured =
      cli({"project", trace, "--hardware", "cpu-10GbE", "--precision", "fp32"});
  EXPECT_EQ(measured.code, 2);
  EXPECT_NE(measured.err.find("no precision applies"), std::string::npos) << measured.err;
}

}  // namespace
}  // namespace shardscope
