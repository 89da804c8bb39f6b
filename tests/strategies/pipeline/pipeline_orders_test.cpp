// The multi-stage schedules' per-rank orders against torch.distributed.pipelining's, action by
// action: for each of (p 2, v 2, m 4), (p 4, v 2, m 8) and (p 3, v 2, m 6), every rank's forwards,
// backwards and input / weight passes, with stage and micro-batch, equal what
// _schedule_visualizer.get_schedule_ops gives for the same schedule (issue 23).
// tests/python/pipeline_orders.py prints PyTorch's; it needs the Python that has torch.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "strategies/pipeline/pipeline_schedule.h"
#include "tests/support/python_modules.h"

namespace shardscope::pipeline {
namespace {

std::string run_and_read(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return "";
  std::string out;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe.get())) out.append(buffer, n);
  return out;
}

std::string letter(Pass pass) {
  return std::string(1, "FBIW"[static_cast<int>(pass)]);
}

TEST(PipelineOrders, EqualPyTorchsGetScheduleOps) {
  const std::string python = SHARDSCOPE_TEST_PYTHON;
  if (!test::python_has_packages("torch")) {
    GTEST_SKIP() << "no Python with torch at " << python;
  }
  const std::string out = run_and_read(python + " " + SHARDSCOPE_SOURCE_DIR +
                                       "/tests/python/pipeline_orders.py 2>/dev/null");
  const auto theirs = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(theirs.is_object()) << out;
  int compared = 0;
  for (const std::string kind : {"interleaved-1f1b", "zero-bubble", "zbv", "dualpipev"}) {
    ASSERT_TRUE(theirs.contains(kind)) << kind;
    for (const auto& [shape, ranks] : theirs[kind].items()) {
      int p = 0, v = 0, m = 0;
      ASSERT_EQ(std::sscanf(shape.c_str(), "%d,%d,%d", &p, &v, &m), 3) << shape;
      ASSERT_EQ(ranks.size(), static_cast<size_t>(p));
      for (int r = 0; r < p; ++r) {
        const auto ours = schedule(kind, r, p, m, v);
        const auto& expected = ranks[r];
        ASSERT_EQ(ours.size(), expected.size()) << kind << " " << shape << " rank " << r;
        for (size_t k = 0; k < ours.size(); ++k) {
          const std::string want = expected[k][0].get<std::string>() +
                                   std::to_string(expected[k][1].get<int>()) + "," +
                                   std::to_string(expected[k][2].get<int>());
          const std::string got = letter(ours[k].pass) + std::to_string(ours[k].stage) + "," +
                                  std::to_string(ours[k].micro);
          ASSERT_EQ(got, want) << kind << " " << shape << " rank " << r << " action " << k;
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 400);
}

}  // namespace
}  // namespace shardscope::pipeline
