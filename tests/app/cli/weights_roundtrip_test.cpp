// Weights in and out for Python users, end to end through the command line: shardscope exports
// (.pt and .safetensors); PyTorch and the safetensors package read both; the same GPT in Python
// (tests/python/pytorch_reference.py) trains a step and saves it the ways people do (torch.save
// of its state_dict, safetensors in fp32, bf16 and fp16, a .pt in fp64); shardscope starts from
// each of those files bit for bit, and a run from one trains like PyTorch's own DDP from it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "app/cli/cli_main.h"
#include "engine/state/initial_weights.h"
#include "engine/state/weights.h"
#include "engine/state/weights_file.h"
#include "engine/train/config.h"
#include "tests/support/python_modules.h"
#include "tests/support/reference_check.h"
#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

namespace fs = std::filesystem;

// The run every step of the round trip uses: DDP with buckets on 2 rank threads, 2 steps.
const std::vector<std::string> kRun = {
    "run",           "--strategy", "ddp_bucketed",       "--world", "2",      "--preset", "tiny",
    "--micro-batch", "2",          "--threads-per-rank", "1",       "--quiet"};
const std::vector<std::string> kTwoSteps = {"--steps", "2"};

struct CliResult {
  int code;
  std::string out;
  std::string err;
};

// `more` after `args`; two steps unless `more` says how many.
CliResult cli(std::vector<std::string> args, const std::vector<std::string>& more = {}) {
  args.insert(args.end(), more.begin(), more.end());
  if (std::find(more.begin(), more.end(), "--steps") == more.end())
    args.insert(args.end(), kTwoSteps.begin(), kTwoSteps.end());
  std::ostringstream out, err;
  const int code = cli::cli_main(args, out, err);
  return {code, out.str(), err.str()};
}

// Runs the Python command line; on failure, what it printed.
testing::AssertionResult python(const std::string& args, const fs::path& log) {
  const std::string command = std::string(SHARDSCOPE_TEST_PYTHON) + " " + SHARDSCOPE_SOURCE_DIR +
                              "/tests/python/" + args + " > " + log.string() + " 2>&1";
  if (std::system(command.c_str()) == 0) return testing::AssertionSuccess();
  std::ifstream in(log);
  return testing::AssertionFailure() << command << "\n" << in.rdbuf();
}

Config run_config() {
  Config c = config_from_json(nlohmann::json{{"preset", "tiny"},
                                             {"strategy", "ddp_bucketed"},
                                             {"world", 2},
                                             {"steps", 2},
                                             {"micro_batch", 2},
                                             {"threads_per_rank", 1}});
  finalize(c);
  return c;
}

nlohmann::json read_json(const fs::path& path) {
  return nlohmann::json::parse(std::ifstream(path));
}

TEST(WeightsRoundTrip, PythonTrainsOurExportAndWeStartFromEveryFileItWrites) {
  if (!test::python_has_packages("torch safetensors")) {
    GTEST_SKIP() << "no Python with torch and safetensors at " << SHARDSCOPE_TEST_PYTHON;
  }
  const fs::path dir = test::test_temp_dir();
  auto at = [&](const std::string& name) { return (dir / name).string(); };

  // 1. Out: the same run exported both ways (the second also shows the export is deterministic).
  CliResult r =
      cli(kRun, {"--export-weights", at("ours.safetensors"), "--json", at("seeded.json")});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  r = cli(kRun, {"--no-reference", "--export-weights", at("ours.pt")});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const Config config = run_config();
  std::ofstream(dir / "config.json") << to_json(config).dump();

  // 2. Python reads both (bitwise equal), trains one step, and writes every format.
  ASSERT_TRUE(python("weights_roundtrip.py train --config " + at("config.json") + " --pt " +
                         at("ours.pt") + " --safetensors " + at("ours.safetensors") + " --dir " +
                         dir.string(),
                     dir / "train.log"));
  const auto trained = read_json(dir / "train.json");
  EXPECT_EQ(trained["tensors"], 29);
  EXPECT_GT(trained["moved"].get<double>(), 1e-3) << "Python's step did not move the weights";

  // 3. In: what --init-weights starts every strategy and the reference from (initial_model),
  // written back by us; the two fp32 files, read by two separate readers, agree bitwise.
  const std::vector<std::pair<std::string, std::string>> loads = {
      {"python.pt", "loaded_from_pt.safetensors"},
      {"python.safetensors", "loaded_from_safetensors.pt"},
      {"python_bf16.safetensors", "loaded_from_bf16.safetensors"},
      {"python_f16.safetensors", "loaded_from_f16.safetensors"},
      {"python_f64.pt", "loaded_from_f64.safetensors"}};
  std::vector<NamedTensors> loaded;
  for (const auto& [file, out] : loads) {
    Config c = config;
    c.init_weights = at(file);
    loaded.push_back(to_cpu_copy(initial_model(c)->named_params()));
    write_weights_file(at(out), loaded.back());
  }
  EXPECT_EQ(weights_checksum(loaded[0]), weights_checksum(loaded[1]));
  EXPECT_NE(weights_checksum(loaded[0]), weights_checksum(loaded[2])) << "bf16 rounds";
  ASSERT_TRUE(python("weights_roundtrip.py verify --dir " + dir.string(), dir / "verify.log"));

  // 4. A run from Python's weights passes its own reference check (ranks and the reference both
  // started from the file), ends elsewhere than the seeded run, and where PyTorch's DDP ends
  // from the same file on the same batches.
  r = cli(kRun, {"--init-weights", at("python.pt"), "--export-weights", at("from_python.pt"),
                 "--json", at("from_python.json")});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const auto ours = read_json(dir / "from_python.json");
  const auto seeded = read_json(dir / "seeded.json");
  EXPECT_EQ(ours["config"]["init_weights"], at("python.pt"));
  EXPECT_LE(ours["reference"]["rel_deviation"].get<double>(), test::kReferenceTolerance);
  EXPECT_NE(ours["steps"][0]["loss"], seeded["steps"][0]["loss"]);
  EXPECT_NE(ours["ranks"][0]["checksum"], seeded["ranks"][0]["checksum"]);

  export_weights(at("batches.pt"), test::batches_of(config));
  ASSERT_TRUE(python("pytorch_reference.py --strategy ddp --config " + at("config.json") +
                         " --init " + at("python.pt") + " --batches " + at("batches.pt") +
                         " --ours " + at("from_python.pt") + " --out " + at("pytorch.json"),
                     dir / "pytorch.log"));
  const auto pytorch = read_json(dir / "pytorch.json");
  EXPECT_GT(pytorch["pytorch_moved"].get<double>(), 1e-3);
  EXPECT_LE(pytorch["rel_deviation"].get<double>(), test::kReferenceTolerance)
      << "worst " << pytorch["worst_parameter"] << " max |delta| " << pytorch["max_abs"];
}

// The tiny model's seeded weights with one change, written as `name` (format by extension).
std::string weights_file(const std::string& name,
                         const std::function<void(NamedTensors&)>& change = {}) {
  const Config c = run_config();
  NamedTensors weights = to_cpu_copy(GptModel(c.model, c.seed)->named_params());
  if (change) change(weights);
  const fs::path path = test::test_temp_dir() / name;
  write_weights_file(path.string(), weights);
  return path.string();
}

void expect_refused(const std::vector<std::string>& extra, const std::string& file,
                    const std::string& message) {
  CliResult r = cli(kRun, extra);
  EXPECT_EQ(r.code, cli::kExitBadInput) << r.err << r.out;
  EXPECT_NE(r.err.find("--init-weights (init_weights)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(file), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
}

TEST(WeightsRoundTrip, BadInitialWeightsExitWithTwoNamingTheFileAndTheTensor) {
  const std::string good = weights_file("good.safetensors");
  expect_refused({"--init-weights", "/nonexistent/w.pt"}, "/nonexistent/w.pt", "no such file");
  const std::string dir = test::test_temp_dir().string();
  expect_refused({"--init-weights", dir}, dir, "is a directory");
  expect_refused({"--init-weights", good, "--layers", "1"}, good,
                 "tensor 'blocks.1.ln1.weight' (shape [64]) is not a parameter");
  expect_refused({"--init-weights", good, "--layers", "3"}, good, "no tensor named 'blocks.2.");
  expect_refused(
      {"--init-weights", good, "--mlp-ratio", "2"}, good,
      "'blocks.0.mlp.fc.weight' has shape [256, 64], the model's parameter is [128, 64]");
  const std::string ints = weights_file(
      "ints.safetensors", [](NamedTensors& w) { w[1].second = w[1].second.to(torch::kInt); });
  expect_refused({"--init-weights", ints}, ints, "tensor 'pos_emb.weight' has dtype I32");
  const std::string cut = (test::test_temp_dir() / "cut.pt").string();
  {
    const std::string whole = weights_file("whole.pt");
    std::ifstream in(whole, std::ios::binary);
    std::string bytes(std::istreambuf_iterator<char>(in), {});
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() * 2 / 3);
  }
  expect_refused({"--init-weights", cut}, cut, "not a readable PyTorch file");
  // A config file sets it too.
  const fs::path config = test::test_temp_dir() / "config.json";
  std::ofstream(config) << nlohmann::json{{"init_weights", "/nonexistent/c.safetensors"}}.dump();
  expect_refused({"--config", config.string()}, "/nonexistent/c.safetensors", "no such file");
}

// A PyTorch state_dict of a model with tied embeddings lists the LM head beside the embedding it
// is (hostile sweep 3: refused as "not a parameter of this model"). Equal to it, it is the same
// parameter and the file loads; a different head is refused; an untied model given our tied
// export is told to add --tie-embeddings.
TEST(WeightsRoundTrip, ATiedModelsStateDictWithItsHeadLoads) {
  Config c = run_config();
  c.model.tie_embeddings = true;
  NamedTensors tied = to_cpu_copy(GptModel(c.model, c.seed)->named_params());
  const torch::Tensor embedding = tied.front().second;  // tok_emb.weight comes first
  ASSERT_EQ(tied.front().first, "tok_emb.weight");
  const fs::path dir = test::test_temp_dir();
  NamedTensors with_head = tied;
  with_head.emplace_back("lm_head.weight", embedding.clone());
  write_weights_file((dir / "state_dict.safetensors").string(), with_head);
  const CliResult loaded = cli(kRun, {"--steps", "2", "--tie-embeddings", "--init-weights",
                                      (dir / "state_dict.safetensors").string()});
  EXPECT_EQ(loaded.code, 0) << loaded.err;
  with_head.back().second = embedding + 1;
  write_weights_file((dir / "other_head.safetensors").string(), with_head);
  const std::string other = (dir / "other_head.safetensors").string();
  expect_refused({"--tie-embeddings", "--init-weights", other}, other,
                 "tensor 'lm_head.weight' (shape [256, 64]) is not a parameter");
  write_weights_file((dir / "tied.safetensors").string(), tied);
  const std::string ours = (dir / "tied.safetensors").string();
  expect_refused({"--init-weights", ours}, ours, "add --tie-embeddings");
}

TEST(WeightsRoundTrip, AResumeContinuesFromItsCheckpointAndItsReferenceFromTheSameFile) {
  torch::manual_seed(5);
  const std::string init = weights_file("init.safetensors", [](NamedTensors& w) {
    for (auto& [name, t] : w) t = t + 0.01 * torch::randn(t.sizes());
  });
  const std::string checkpoints = (test::test_temp_dir() / "ck").string();
  const std::string json = (test::test_temp_dir() / "resumed.json").string();
  CliResult r = cli(kRun, {"--init-weights", init, "--checkpoint-dir", checkpoints,
                           "--checkpoint-every", "1", "--steps", "1", "--no-reference"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  // The checkpoint's weights win; the reference trains all 2 steps from the file and agrees.
  r = cli(kRun, {"--init-weights", init, "--resume", checkpoints, "--json", json});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const auto summary = nlohmann::json::parse(std::ifstream(json));
  EXPECT_EQ(summary["resumed_from"]["step"], 1);
  EXPECT_LE(summary["reference"]["rel_deviation"].get<double>(), test::kReferenceTolerance);
  // Without the file the reference would start elsewhere: refused, naming both starts.
  r = cli(kRun, {"--resume", checkpoints});
  EXPECT_EQ(r.code, cli::kExitBadInput) << r.err << r.out;
  EXPECT_NE(r.err.find("--init-weights (init_weights): the checkpoint's run started from "
                       "--init-weights " +
                       init + ", this run names the seed's weights"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace shardscope
