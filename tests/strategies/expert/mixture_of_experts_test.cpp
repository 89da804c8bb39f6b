// A mixture-of-experts model trains exactly like one device under every strategy that holds
// whole blocks (the data-parallel family and cp): its routing is per token and dropless, so how
// the batch is split over ranks changes nothing. Plain SGD as well, which shows a wrongly scaled
// expert gradient at once.
#include <gtest/gtest.h>

#include "engine/train/config.h"
#include "engine/train/run.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

class MoeMatchesReference : public testing::TestWithParam<std::string> {};

Config moe_config(const std::string& strategy) {
  Config c = test::tiny_config(strategy, 2, 2);
  c.model.experts = 4;
  c.model.top_k = 2;
  finalize(c);
  return c;
}

TEST_P(MoeMatchesReference, AfterFiveAdamWSteps) {
  test::expect_matches_reference(run_training(moe_config(GetParam())));
}

TEST_P(MoeMatchesReference, WithSgdMomentum) {
  Config c = moe_config(GetParam());
  test::use_sgd_with_momentum(c);
  test::expect_matches_reference(run_training(c));
}

INSTANTIATE_TEST_SUITE_P(Strategies, MoeMatchesReference,
                         testing::Values("ddp_bucketed", "torch_ddp", "zero1", "zero2", "fsdp",
                                         "cp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace shardscope
