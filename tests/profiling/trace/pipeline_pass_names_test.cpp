// The timeline's short names of pipeline passes, read from the names the pipeline runtime gives
// them (strategies/pipeline/pipeline_runtime.cpp).
#include "profiling/trace/pipeline_pass_names.h"

#include <gtest/gtest.h>

namespace shardscope::profiling {
namespace {

TEST(PipelinePassNames, EachPassHasAShortLabelAndItsStage) {
  EXPECT_EQ(pass_label("forward micro-batch 3").text, "F mb3");
  EXPECT_EQ(pass_label("forward micro-batch 3").stage, -1);
  const PassLabel f = pass_label("forward micro-batch 3 stage 2");
  EXPECT_EQ(f.text, "F s2 mb3");
  EXPECT_EQ(f.stage, 2);
  EXPECT_EQ(f.compact, "F s2 m3");
  EXPECT_EQ(pass_label("backward micro-batch 0 stage 5").text, "B s5 mb0");
  EXPECT_EQ(pass_label("backward input micro-batch 7 stage 1").text, "I s1 mb7");
  EXPECT_EQ(pass_label("backward weights micro-batch 12").text, "W mb12");
}

TEST(PipelinePassNames, OtherSpansHaveNone) {
  for (const char* name : {"forward blocks.0", "forward micro-batch", "forward micro-batch x",
                           "optimizer step", "", "backward micro-batchy 3"}) {
    EXPECT_TRUE(pass_label(name).text.empty()) << name;
  }
}

}  // namespace
}  // namespace shardscope::profiling
