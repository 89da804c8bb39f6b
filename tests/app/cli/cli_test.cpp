// The command line as a user meets it: exit codes, messages naming the flag, the JSON summary,
// and weights that Python's torch.load reads back.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/cli/exit_code.h"
#include "profiling/io/trace_io.h"
#include "tests/support/bad_configs.h"
#include "tests/support/cli_runner.h"
#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

using test::cli;
using CliResult = test::CliResult;

std::filesystem::path temp_dir() {
  return test::test_temp_dir();
}

class BadConfigFile : public testing::TestWithParam<test::BadConfigCase> {};

TEST_P(BadConfigFile, ExitsWithCodeTwoAndNamesTheField) {
  auto path = temp_dir() / "config.json";
  std::ofstream(path) << GetParam().json;
  CliResult r = cli({"run", "--config", path.string()});
  EXPECT_EQ(r.code, cli::kExitBadInput) << r.err;
  EXPECT_NE(r.err.find(GetParam().field), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(GetParam().message), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Table, BadConfigFile, testing::ValuesIn(test::bad_config_cases()),
                         [](const auto& info) { return test::bad_config_name(info.param); });

struct BadFlags {
  std::vector<std::string> args;
  std::string message;
};

void PrintTo(const BadFlags& c, std::ostream* os) {
  for (const auto& a : c.args) *os << a << ' ';
}

std::string flag_case_name(const testing::TestParamInfo<BadFlags>& info) {
  std::string name;
  for (const auto& arg : info.param.args) {
    for (char ch : arg) name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    name += '_';
  }
  return name + std::to_string(info.index);
}

class BadFlag : public testing::TestWithParam<BadFlags> {};

TEST_P(BadFlag, ExitsWithCodeTwoAndNamesTheFlag) {
  std::vector<std::string> args{"run"};
  args.insert(args.end(), GetParam().args.begin(), GetParam().args.end());
  CliResult r = cli(args);
  EXPECT_EQ(r.code, cli::kExitBadInput) << r.err;
  EXPECT_NE(r.err.find(GetParam().message), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.find("step  loss") == std::string::npos) << "training started";
}

INSTANTIATE_TEST_SUITE_P(
    Table, BadFlag,
    testing::Values(
        BadFlags{{"--heads", "5"}, "--heads (model.heads)"},
        BadFlags{{"--world", "0"}, "--world (world): must be at least 1"},
        BadFlags{{"--world", "two"}, "--world (world): expected an integer"},
        BadFlags{{"--strategy", "zero9"}, "unknown strategy 'zero9'"},
        BadFlags{{"--lr", "1e-3x"}, "--lr (optimizer.lr): expected a number"},
        BadFlags{{"--no-such-flag"}, "no-such-flag"},
        BadFlags{{"--config", "/nonexistent/x.json"}, "cannot read config file"},
        BadFlags{{"--strategy", "torch_ddp", "--world", "4", "--global-batch", "6"},
                 "--global-batch (global_batch)"},
        BadFlags{{"--inject-fault", "rank=9"}, "--inject-fault (inject_fault)"},
        BadFlags{{"--resume", "/nonexistent/checkpoints"}, "--resume (resume): no such directory"},
        BadFlags{{"--checkpoint-every", "2"}, "--checkpoint-every (checkpoint_every)"},
        BadFlags{{"--checkpoint-dir", "/proc/version/ck"}, "--checkpoint-dir (checkpoint_dir)"},
        BadFlags{{"--lr", "inf"}, "--lr (optimizer.lr): expected a finite number"},
        BadFlags{{"--tolerance", "nan"}, "must be a finite number"},
        BadFlags{{"--lr", "nan"}, "--lr (optimizer.lr): expected a finite number"},
        BadFlags{{"--memory-limit-mb", "-inf"}, "expected a finite number"},
        BadFlags{{"--config", "/"}, "is a directory"},
        BadFlags{{"--strategy", "pp", "--world", "2", "--schedule", "zigzag"},
                 "--schedule (strategy_options.schedule): unknown pipeline schedule"},
        BadFlags{{"--strategy", "pp", "--world", "2", "--schedule", "zbv", "--layers", "4",
                  "--stages-per-rank", "3"},
                 "--stages-per-rank (strategy_options.stages_per_rank)"},
        BadFlags{{"--strategy", "pp", "--world", "2", "--stages-per-rank", "2"},
                 "--stages-per-rank (strategy_options.stages_per_rank)"}),
    flag_case_name);

TEST(Cli, ANumberNoDoubleHoldsIsBadJsonNotACrash) {
  auto path = temp_dir() / "huge.json";
  std::ofstream(path) << R"({"optimizer":{"lr":1e400}})";
  CliResult r = cli({"run", "--config", path.string()});
  EXPECT_EQ(r.code, cli::kExitBadInput) << r.err;
  EXPECT_NE(r.err.find("not valid JSON"), std::string::npos) << r.err;
}

TEST(Cli, HelpDocumentsEveryFlag) {
  CliResult top = cli({"--help"});
  EXPECT_EQ(top.code, 0);
  EXPECT_NE(top.out.find("run"), std::string::npos);
  CliResult run = cli({"run", "--help"});
  EXPECT_EQ(run.code, 0);
  for (const char* flag :
       {"--strategy", "--world", "--steps", "--preset", "--json", "--export-weights",
        "--grad-accum", "--bucket-mb", "--config", "--no-reference"}) {
    EXPECT_NE(run.out.find(flag), std::string::npos) << flag;
  }
  // bench's help says bench's defaults (it said run's, world 1 on tiny, and then blamed a
  // --world 4 the user never gave).
  CliResult bench = cli({"bench", "--help"});
  EXPECT_EQ(bench.code, 0);
  EXPECT_NE(bench.out.find("--world INT=4"), std::string::npos) << bench.out;
  EXPECT_NE(bench.out.find("--preset TEXT=small"), std::string::npos) << bench.out;
  EXPECT_NE(bench.out.find("--steps INT=6"), std::string::npos) << bench.out;
}

TEST(Cli, ListsStrategiesAndPresets) {
  CliResult s = cli({"strategies"});
  EXPECT_EQ(s.code, 0);
  EXPECT_NE(s.out.find("torch_ddp"), std::string::npos);
  EXPECT_NE(s.out.find("single"), std::string::npos);
  CliResult p = cli({"presets"});
  EXPECT_NE(p.out.find("gpt2-small"), std::string::npos);
}

TEST(Cli, RunPrintsStepsChecksumsAndTheReferenceCheck) {
  auto dir = temp_dir();
  auto json_path = dir / "summary.json";
  auto weights_path = dir / "weights.pt";
  CliResult r = cli({"run", "--strategy", "torch_ddp", "--world", "2", "--steps", "3", "--preset",
                     "tiny", "--grad-accum", "2", "--json", json_path.string(), "--export-weights",
                     weights_path.string()});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("ranks agree: yes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("relative deviation"), std::string::npos) << r.out;
  for (const char* step : {"\n   0  ", "\n   1  ", "\n   2  "})
    EXPECT_NE(r.out.find(step), std::string::npos);

  std::ifstream in(json_path);
  auto summary = nlohmann::json::parse(in);
  EXPECT_EQ(summary["config"]["strategy"], "torch_ddp");
  EXPECT_EQ(summary["steps"].size(), 3u);
  EXPECT_EQ(summary["ranks"].size(), 2u);
  EXPECT_EQ(summary["ranks"][0]["checksum"], summary["ranks"][1]["checksum"]);
  EXPECT_TRUE(summary["ranks_agree"].get<bool>());
  EXPECT_LE(summary["reference"]["rel_deviation"].get<double>(), 1e-5);
  EXPECT_GT(summary["steps"][0]["step_time_s"].get<double>(), 0.0);

  // Python's torch.load reads the exported weights: same names, same sum as rank 0's.
  auto script = dir / "load.py";
  std::ofstream(script) << "import sys, torch\n"
                           "d = torch.load(sys.argv[1])\n"
                           "print(len(d), repr(sum(float(t.double().sum()) for t in d.values())),"
                           " list(d)[0], tuple(d['tok_emb.weight'].shape))\n";
  auto out_path = dir / "python.txt";
  std::string command = std::string(SHARDSCOPE_TEST_PYTHON) + " " + script.string() + " " +
                        weights_path.string() + " > " + out_path.string() + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream py(out_path);
  size_t count = 0;
  double sum = 0;
  std::string first, shape;
  py >> count >> sum >> first;
  std::getline(py, shape);
  EXPECT_EQ(count, 29u);  // tiny: 2 embeddings, 2 blocks of 12 tensors, final LN (2), LM head
  EXPECT_NEAR(sum, summary["ranks"][0]["weight_sum"].get<double>(), 1e-6 * std::abs(sum) + 1e-6);
  EXPECT_EQ(first, "tok_emb.weight");
  EXPECT_NE(shape.find("(256, 64)"), std::string::npos) << shape;
}

TEST(Cli, ConfigFileKeysApplyAndFlagsOverrideThem) {
  auto json_path = temp_dir() / "summary.json";
  CliResult r = cli({"run", "--config", SHARDSCOPE_SOURCE_DIR "/assets/presets/tiny-ddp.json",
                     "--world", "3", "--quiet", "--json", json_path.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream in(json_path);
  auto config = nlohmann::json::parse(in)["config"];
  EXPECT_EQ(config["world"], 3);              // the flag wins
  EXPECT_EQ(config["grad_accum"], 2);         // from the file
  EXPECT_EQ(config["model"]["layers"], 1);    // from the file, over the preset
  EXPECT_EQ(config["model"]["d_model"], 64);  // from the preset
  EXPECT_EQ(config["optimizer"]["schedule"], "cosine");
}

TEST(Cli, AFailedRankExitsWithCodeOneAndNamesIt) {
  CliResult r = cli({"run", "--strategy", "torch_ddp", "--world", "3", "--steps", "3",
                     "--inject-fault", "rank=1,step=1", "--timeout", "600"});
  EXPECT_EQ(r.code, cli::kExitRunFailed);
  EXPECT_NE(r.err.find("rank 1 failed: injected fault"), std::string::npos) << r.err;
}

// A run that fails after writing checkpoints says which one to continue from and how; the
// command it prints does continue it, to the end.
TEST(Cli, AFailedRunWithCheckpointsPrintsTheCommandThatContinuesIt) {
  const std::string dir = (temp_dir() / "ck").string();
  const std::vector<std::string> args = {"run",
                                         "--strategy",
                                         "zero2",
                                         "--world",
                                         "2",
                                         "--steps",
                                         "4",
                                         "--preset",
                                         "tiny",
                                         "--quiet",
                                         "--checkpoint-every",
                                         "1",
                                         "--checkpoint-dir",
                                         dir};
  std::vector<std::string> failing = args;
  failing.insert(failing.end(), {"--inject-fault", "rank=1,step=2"});
  CliResult r = cli(failing);
  EXPECT_EQ(r.code, cli::kExitRunFailed);
  EXPECT_NE(r.err.find("the newest valid checkpoint is " + dir + "/step-000002"), std::string::npos)
      << r.err;
  const std::string hint =
      "shardscope run --strategy zero2 --world 2 --steps 4 --preset tiny "
      "--quiet --checkpoint-every 1 --checkpoint-dir " +
      dir + " --resume " + dir;
  EXPECT_NE(r.err.find(hint), std::string::npos) << r.err;
  std::vector<std::string> resumed = args;
  resumed.insert(resumed.end(), {"--resume", dir});
  CliResult after = cli(resumed);
  EXPECT_EQ(after.code, cli::kExitOk) << after.err;
}

}  // namespace
}  // namespace shardscope

namespace shardscope {
namespace {

TEST(CliTrace, RunWritesBothFormatsAndReportReadsThem) {
  auto dir = test::test_temp_dir();
  for (const char* name : {"run.json", "run.sst"}) {
    const auto path = (dir / name).string();
    auto r = cli({"run", "--strategy", "ddp_bucketed", "--world", "2", "--preset", "tiny",
                  "--steps", "3", "--no-reference", "--trace", path});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("trace written to " + path), std::string::npos) << r.out;
    auto report = cli({"report", path});
    ASSERT_EQ(report.code, 0) << report.err;
    EXPECT_NE(report.out.find("2 ranks"), std::string::npos) << report.out;
    EXPECT_NE(report.out.find("ddp_bucketed, world 2"), std::string::npos) << report.out;
    EXPECT_NE(report.out.find("all_reduce"), std::string::npos) << report.out;
    EXPECT_NE(report.out.find("overlap"), std::string::npos) << report.out;
  }
}

TEST(CliTrace, ReportShowsDeviceTimeByDefaultAndTheWallClockOnRequest) {
  const auto path = (test::test_temp_dir() / "lens.sst").string();
  ASSERT_EQ(cli({"run", "--strategy", "ddp_bucketed", "--world", "2", "--preset", "tiny", "--steps",
                 "3", "--no-reference", "--trace", path})
                .code,
            0);
  const auto device = cli({"report", path});
  ASSERT_EQ(device.code, 0) << device.err;
  EXPECT_NE(device.out.find("times: device time: 2 ranks on cpu-10GbE, compute x1"),
            std::string::npos)
      << device.out;
  const auto h100 = cli({"report", path, "--hardware", "8xH100"});
  ASSERT_EQ(h100.code, 0) << h100.err;
  EXPECT_NE(h100.out.find("times: device time: 2 ranks on 8xH100"), std::string::npos) << h100.out;
  const auto measured = cli({"report", path, "--measured"});
  ASSERT_EQ(measured.code, 0) << measured.err;
  EXPECT_NE(measured.out.find("times: measured wall clock"), std::string::npos) << measured.out;
  const auto bad = cli({"report", path, "--hardware", "nosuch"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--hardware"), std::string::npos) << bad.err;
}

TEST(CliTrace, AFailedRunStillWritesItsTrace) {
  auto path = (test::test_temp_dir() / "failed.sst").string();
  auto r = cli({"run", "--strategy", "ddp_bucketed", "--world", "2", "--preset", "tiny", "--steps",
                "3", "--no-reference", "--inject-fault", "rank=1,step=1", "--trace", path});
  EXPECT_EQ(r.code, 1);
  auto report = cli({"report", path});
  ASSERT_EQ(report.code, 0) << report.err;
  EXPECT_NE(report.out.find("rank 1 FAILED: injected fault"), std::string::npos) << report.out;
}

TEST(CliTrace, ReportRejectsWhatIsNotATrace) {
  auto dir = test::test_temp_dir();
  std::ofstream(dir / "garbage.json") << "{\"traceEvents\": [1, 2";
  auto r = cli({"report", (dir / "garbage.json").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("garbage.json"), std::string::npos) << r.err;
  auto missing = cli({"report", (dir / "missing.sst").string()});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("does not exist"), std::string::npos) << missing.err;
  // Each kind of path that is not a trace is named as what it is.
  std::ofstream(dir / "empty.sst");
  std::ofstream(dir / "notes.txt") << "hello";
  std::filesystem::create_directories(dir / "folder");
  const std::pair<std::string, std::string> cases[] = {
      {"empty.sst", "the file is empty"},
      {"notes.txt", "not a trace"},
      {"folder", "is a directory without trace.sst"},
  };
  for (const auto& [name, phrase] : cases) {
    auto bad = cli({"report", (dir / name).string()});
    EXPECT_EQ(bad.code, 2) << name;
    EXPECT_NE(bad.err.find(phrase), std::string::npos) << bad.err;
  }
}

// A plain Chrome trace of another tool (PyTorch's profiler) is a trace to report on, not a
// failed run.
TEST(CliTrace, ReportReadsAnotherToolsChromeTrace) {
  auto dir = test::test_temp_dir();
  std::ofstream(dir / "pytorch.json")
      << R"({"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":2841234,)"
      << R"("tid":2841234,"ts":1700000000000.5,"dur":12.5}]})";
  auto r = cli({"report", (dir / "pytorch.json").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("1 ranks, 1 events"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace shardscope

namespace shardscope {
namespace {

TEST(CliBench, ComparesStrategiesInOneTableAgainstOneReference) {
  auto dir = test::test_temp_dir();
  auto r = cli({"bench", "--quick", "--world", "2", "--strategies",
                "torch_ddp,zero2,fsdp,ddp_flat+zero1", "--format", "json", "--out", dir.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 4u);
  for (const auto& row : rows) {
    SCOPED_TRACE(row["strategy"].get<std::string>());
    EXPECT_TRUE(row["ok"].get<bool>());
    EXPECT_EQ(row["world"], 2);
    EXPECT_LE(row["rel_deviation"].get<double>(), 1e-5);
    EXPECT_GT(row["peak_allocated_bytes_max"].get<int64_t>(), 0);
    EXPECT_GT(row["bytes_per_step"].get<int64_t>(), 0);
    EXPECT_GT(row["median_step_s"].get<double>(), 0.0);
    EXPECT_EQ(row["replicated"].get<bool>(), row["strategy"] != "fsdp");
  }
  EXPECT_TRUE(std::filesystem::exists(dir / "fsdp.sst"));
  EXPECT_TRUE(std::filesystem::exists(dir / "ddp_flat_zero1.sst"));
  // A bench trace fills what a run's does: the Weight-sync table against the shared reference,
  // and the reference's loss line.
  const profiling::Trace zero2 = profiling::read_trace_file((dir / "zero2.sst").string());
  ASSERT_TRUE(zero2.run.result && zero2.run.result->reference);
  EXPECT_EQ(zero2.run.result->reference->losses.size(), zero2.run.result->steps.size());
  ASSERT_EQ(zero2.run.result->sync_ranks.size(), 2u);
  for (const auto& rank : zero2.run.result->sync_ranks) {
    EXPECT_EQ(rank.vs_reference.size(), zero2.run.result->sync_groups.size());
    for (double d : rank.vs_reference) EXPECT_LE(d, 1e-4);
  }
  // Not a terminal: a line per run, no carriage returns.
  EXPECT_NE(r.err.find("[4/4] ddp_flat+zero1: done\n"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
}

TEST(CliBench, SkipsWhatCannotRunAndKeepsGoing) {
  auto r = cli({"bench", "--quick", "--world", "2", "--strategies", "zero1,ddp_flat", "--offload",
                "--format", "markdown"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("| zero1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("skipped ddp_flat: strategy_options.offload"), std::string::npos) << r.out;
}

// pp's default layout (a stage per rank, 4) does not fit tiny's 2 blocks: it runs as pp 2 x dp 2
// on the same model and global batch, says so, and compares with torch_ddp.
TEST(CliBench, EveryStrategyGetsItsRowInTheLayoutItNeeds) {
  auto r = cli({"bench", "--quick", "--strategies", "torch_ddp,pp", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 2u);
  const auto& pp = rows[1];
  EXPECT_EQ(pp["strategy"], "pp");
  EXPECT_TRUE(pp["ok"].get<bool>()) << pp.dump();
  EXPECT_FALSE(pp["skipped"].get<bool>());
  EXPECT_EQ(pp["layout"], "dp2 x pp2");
  EXPECT_LE(pp["rel_deviation"].get<double>(), 1e-5);
  EXPECT_TRUE(pp["vs_torch_ddp_peak"].is_number()) << pp.dump();
  EXPECT_NE(r.err.find("pp runs as dp2 x pp2"), std::string::npos) << r.err;
  auto table = cli({"bench", "--quick", "--strategies", "pp", "--format", "markdown"});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("| pp (dp2 x pp2)"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("skipped"), std::string::npos) << table.out;
}

// --schedules: a pipeline runs once per schedule, each against the one reference, and the
// schedule sets its rows apart (the markdown gets a schedule column); a strategy with no
// pipeline runs once.
TEST(CliBench, ComparesPipelineSchedulesRowByRow) {
  auto r = cli({"bench", "--quick", "--world", "2", "--layers", "4", "--strategies",
                "ddp_bucketed,pp", "--schedules", "1f1b,interleaved-1f1b,zbv", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 4u) << r.out;
  EXPECT_EQ(rows[0]["strategy"], "ddp_bucketed");
  std::vector<std::string> schedules;
  for (size_t i = 1; i < rows.size(); ++i) {
    SCOPED_TRACE(rows[i].dump());
    EXPECT_EQ(rows[i]["strategy"], "pp");
    EXPECT_TRUE(rows[i]["ok"].get<bool>());
    EXPECT_LE(rows[i]["rel_deviation"].get<double>(), 1e-5);
    schedules.push_back(rows[i]["attributes"]["schedule"].get<std::string>());
  }
  EXPECT_EQ(schedules, (std::vector<std::string>{"1f1b", "interleaved-1f1b", "zbv"}));
  EXPECT_NE(r.err.find("[4/4] pp zbv: done"), std::string::npos) << r.err;
  auto bad = cli({"bench", "--quick", "--schedules", "2f2b"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("2f2b"), std::string::npos) << bad.err;
}

TEST(CliBench, BadInputIsExitCodeTwo) {
  EXPECT_EQ(cli({"bench", "--quick", "--strategies", "nope"}).code, 2);
  EXPECT_EQ(cli({"bench", "--quick", "--format", "xml"}).code, 2);
  EXPECT_EQ(cli({"bench", "--quick", "--world", "0"}).code, 2);
}

}  // namespace
}  // namespace shardscope

namespace shardscope {
namespace {

TEST(CliProject, PredictsOneCollective) {
  auto r =
      cli({"project", "--collective", "all_reduce", "--bytes", "1GiB", "--hardware", "8xA100"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("1 GiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ring"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Simple"), std::string::npos) << r.out;
}

TEST(CliProject, TabulatesMemoryAndFlagsWhatDoesNotFit) {
  auto r = cli(
      {"project", "--memory", "--preset", "gpt-7b", "--micro-batch", "1", "--hardware", "8xH100"});
  ASSERT_EQ(r.code, 0) << r.err;
  // Plain DDP of 7 B parameters needs 16 bytes each before activations: over 80 GiB.
  const auto ddp = r.out.find("dp8                   ddp");
  ASSERT_NE(ddp, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NO (out of memory)", ddp), std::string::npos);
  EXPECT_NE(r.out.find("zero3"), std::string::npos);
}

TEST(CliCalibrate, WritesAProfileThatProjectUses) {
  const std::string path = (temp_dir() / "this-machine.json").string();
  auto r = cli({"calibrate", "--quick", "--out", path});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("fitted: base"), std::string::npos) << r.out;
  auto p = cli({"project", "--collective", "all_reduce", "--bytes", "1MiB", "--ranks", "2",
                "--hardware", path});
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.out.find("Simple"), std::string::npos) << p.out;
}

TEST(CliProject, BadInputExitsWithTwo) {
  EXPECT_EQ(cli({"project", "--collective", "all_reduce", "--hardware", "nope"}).code, 2);
  EXPECT_EQ(cli({"project", "--collective", "all_reduce", "--bytes", "lots"}).code, 2);
  EXPECT_EQ(cli({"project", "--collective", "all_reduce", "--ranks", "9"}).code, 2);
  EXPECT_EQ(cli({"project", "--collective", "frobnicate"}).code, 2);
  // Nothing chosen to project (no trace, collective, memory or run flag) is refused, not a
  // projection of the defaults nobody asked for.
  const auto bare = cli({"project", "--hardware", "8xA100"});
  EXPECT_EQ(bare.code, 2);
  EXPECT_NE(bare.err.find("nothing to project"), std::string::npos) << bare.err;
  EXPECT_EQ(cli({"project", "--memory", "--preset", "huge"}).code, 2);
}

// Each bad value says what is wrong with it, not what to give instead of it.
TEST(CliProject, BadValuesAreNamed) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const auto empty = temp_dir() / "empty.json";
  std::ofstream(empty) << R"({"traceEvents":[]})";
  for (const Case& c : std::vector<Case>{
           {{"project", empty.string(), "--hardware", "8xH100", "--compute-scale", "0.5"},
            "no ranks"},
           {{"project", empty.string(), "--hardware", "8xH100", "--compute-scale", "-1"},
            "--compute-scale must be a positive number, got -1"},
           {{"project", empty.string(), "--hardware", "8xH100", "--compute-scale", "1e12"},
            "--compute-scale must lie between 1e-06 and 1e+06, got 1e+12"},
           {{"project", "--collective", "all_reduce", "--bytes", "99999999999999999999GiB"},
            "too large"},
           {{"project", "--collective", "all_reduce", "--ranks", "0"},
            "--ranks must be at least 2"},
           {{"project", "--collective", "all_reduce", "--ranks", "-4"},
            "--ranks must be at least 2"},
       }) {
    CliResult r = cli(c.args);
    EXPECT_EQ(r.code, 2) << c.args[1] << " " << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace shardscope
