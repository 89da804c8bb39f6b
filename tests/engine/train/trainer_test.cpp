// The trainer's step against a plain loop's: it waits on the device no earlier than a plain loop
// does, so on a GPU the host dispatches the optimizer step while backward still runs.
#include <gtest/gtest.h>

#include <ATen/record_function.h>

#include <mutex>
#include <string>
#include <vector>

#include "engine/train/config.h"
#include "engine/train/run.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

std::mutex seen_mutex;
std::vector<std::string>* seen = nullptr;

std::unique_ptr<at::ObserverContext> op_begins(const at::RecordFunction& fn) {
  std::lock_guard<std::mutex> lock(seen_mutex);
  if (seen != nullptr) {
    const bool node = fn.scope() == at::RecordScope::BACKWARD_FUNCTION;
    seen->push_back(node ? "backward node" : fn.name());
  }
  return nullptr;
}

// Reading a loss (item) makes the host wait for the device. A plain loop reads it after the
// optimizer step; the trainer once read each micro-batch's as it ended, so the optimizer's kernels
// were dispatched only once backward's had run.
TEST(Trainer, ReadsTheLossesOnlyAfterTheOptimizerStep) {
  for (const int accumulation : {1, 3}) {
    Config c = test::tiny_config("single", 1, accumulation);
    c.steps = 2;
    c.reference = false;
    std::vector<std::string> names;
    {
      std::lock_guard<std::mutex> lock(seen_mutex);
      seen = &names;
    }
    const auto handle = at::addGlobalCallback(at::RecordFunctionCallback(op_begins).scopes(
        {at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
    const RunSummary s = run_training(c);
    at::removeCallback(handle);
    {
      std::lock_guard<std::mutex> lock(seen_mutex);
      seen = nullptr;
    }
    ASSERT_TRUE(s.ok) << s.failure;
    // Between the first backward and the optimizer's first update (AdamW's addcdiv_), nothing
    // is read back from the device.
    size_t backward = 0;
    while (backward < names.size() && names[backward] != "backward node") ++backward;
    ASSERT_LT(backward, names.size());
    size_t update = backward;
    while (update < names.size() && names[update] != "aten::addcdiv_") ++update;
    ASSERT_LT(update, names.size());
    int reads = 0;
    for (size_t i = backward; i < update; ++i) reads += names[i] == "aten::item";
    EXPECT_EQ(reads, 0) << accumulation << " micro-batches";
    // And every micro-batch's loss is read after it, before the step's record is made.
    int after = 0;
    for (size_t i = update; i < names.size() && names[i] != "backward node"; ++i)
      after += names[i] == "aten::item";
    EXPECT_GE(after, accumulation);
  }
}

}  // namespace
}  // namespace shardscope
