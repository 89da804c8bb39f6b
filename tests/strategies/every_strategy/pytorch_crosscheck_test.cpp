// Our strategies against PyTorch's own Python implementations (DistributedDataParallel,
// ZeroRedundancyOptimizer, FSDP2's fully_shard) on Gloo and the CPU: from the same initial
// weights and the same per-rank batches, both must end at the same weights.
// tests/python/pytorch_reference.py does the Python side; it needs the Python that has torch.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "engine/model/gpt_model.h"
#include "engine/state/weights.h"
#include "engine/train/config.h"
#include "engine/train/run.h"
#include "tests/support/python_modules.h"
#include "tests/support/reference_check.h"
#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

struct CrossCheck {
  std::string ours;
  std::string theirs;  // ddp | zero | fsdp
  int world;
  int accum;
};

void PrintTo(const CrossCheck& c, std::ostream* os) {
  *os << c.ours << " vs PyTorch " << c.theirs << ", world " << c.world << ", accum " << c.accum;
}

class PyTorchCrossCheck : public testing::TestWithParam<CrossCheck> {};

TEST_P(PyTorchCrossCheck, SameWeightsAsPyTorchAfterFiveSteps) {
  if (!test::python_has_packages("torch")) {
    GTEST_SKIP() << "no Python with torch at " << SHARDSCOPE_TEST_PYTHON
                 << " (configure with -DSHARDSCOPE_PYTHON=...)";
  }
  const CrossCheck& p = GetParam();
  Config c = test::tiny_config(p.ours, p.world, p.accum);
  c.reference = false;
  RunSummary s = run_training(c);
  ASSERT_TRUE(s.ok) << s.failure;

  const auto dir = test::test_temp_dir();
  export_weights((dir / "init.pt").string(),
                 to_cpu_copy(GptModel(c.model, c.seed)->named_params()));
  export_weights((dir / "batches.pt").string(), test::batches_of(c));
  export_weights((dir / "ours.pt").string(), s.weights);
  std::ofstream(dir / "config.json") << to_json(c).dump();

  const std::string command =
      std::string(SHARDSCOPE_TEST_PYTHON) + " " + SHARDSCOPE_SOURCE_DIR +
      "/tests/python/pytorch_reference.py --strategy " + p.theirs + " --config " +
      (dir / "config.json").string() + " --init " + (dir / "init.pt").string() + " --batches " +
      (dir / "batches.pt").string() + " --ours " + (dir / "ours.pt").string() + " --out " +
      (dir / "result.json").string() + " > " + (dir / "python.log").string() + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command << "\n"
                                             << std::ifstream(dir / "python.log").rdbuf();
  auto result = nlohmann::json::parse(std::ifstream(dir / "result.json"));
  EXPECT_GT(result["pytorch_moved"].get<double>(), 1e-3) << "PyTorch did not train";
  EXPECT_LE(result["rel_deviation"].get<double>(), test::kReferenceTolerance)
      << "worst " << result["worst_parameter"] << " max |delta| " << result["max_abs"];
}

INSTANTIATE_TEST_SUITE_P(Strategies, PyTorchCrossCheck,
                         testing::Values(CrossCheck{"torch_ddp", "ddp", 2, 1},
                                         CrossCheck{"ddp_bucketed", "ddp", 4, 2},
                                         CrossCheck{"zero1", "zero", 2, 1},
                                         CrossCheck{"fsdp", "fsdp", 2, 1},
                                         CrossCheck{"fsdp", "fsdp", 4, 2}),
                         [](const auto& info) {
                           return info.param.ours + "_world" + std::to_string(info.param.world) +
                                  "_accum" + std::to_string(info.param.accum);
                         });

}  // namespace
}  // namespace shardscope
