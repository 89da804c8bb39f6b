#include "app/gui/gui_script.h"

#include <stdexcept>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace shardscope::gui {
namespace {

TEST(GuiScript, ParsesActionsAndSkipsCommentsAndBlankLines) {
  const auto actions =
      parse_script("# a tour\nopen a.sst\n\ntab timeline  # go\nselect 1 all_reduce 2\n");
  ASSERT_EQ(actions.size(), 3u);
  EXPECT_EQ(actions[0].verb, "open");
  EXPECT_EQ(actions[0].line, 2);
  EXPECT_EQ(actions[2].args, (std::vector<std::string>{"1", "all_reduce", "2"}));
  const auto quoted = parse_script("hover 0 \"optimizer step\" 1\n");
  EXPECT_EQ(quoted[0].args, (std::vector<std::string>{"0", "optimizer step", "1"}));
}

TEST(GuiScript, NamesTheLineOfAnUnknownActionOrWrongArguments) {
  try {
    parse_script("open a\nzoomify 3\n");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("line 2"));
    EXPECT_THAT(e.what(), testing::HasSubstr("zoomify"));
  }
  EXPECT_THROW(parse_script("click 10\n"), std::runtime_error);
  EXPECT_THROW(parse_script("fit now\n"), std::runtime_error);
}

// `range nan nan` (or inf, or +-1e300) once grew memory until the app died (issue 33).
TEST(GuiScript, ARangeOfNoFiniteTimesIsRefusedByLine) {
  for (const char* bad : {"range nan nan", "range 0 inf", "range -1e300 1e300", "range 5 5",
                          "range 9 2", "range 1ms 2"}) {
    try {
      parse_script(std::string("fit\n") + bad + "\n");
      FAIL() << bad;
    } catch (const std::runtime_error& e) {
      EXPECT_THAT(e.what(), testing::HasSubstr("line 2")) << bad;
      EXPECT_THAT(e.what(), testing::HasSubstr("'range'")) << bad;
    }
  }
  EXPECT_EQ(parse_script("range 97 111\n").size(), 1u);
}

// `frames N` waits N frames: a whole number up to a minute's; 100000 once held the app for half an
// hour, and "-5" or "abc" failed only once the window was up.
TEST(GuiScript, FramesTakeAWholeNumberUpToAMinutesWorth) {
  for (const char* bad : {"frames -5", "frames abc", "frames 1e9", "frames 3601", "frames 2.5",
                          "frames 100000", "frames +3"}) {
    try {
      parse_script(std::string("fit\n") + bad + "\n");
      FAIL() << bad;
    } catch (const std::runtime_error& e) {
      EXPECT_THAT(e.what(), testing::HasSubstr("line 2: 'frames' takes a whole number")) << bad;
    }
  }
  EXPECT_EQ(parse_script("frames 0\nframes 3600\n").size(), 2u);
}

}  // namespace
}  // namespace shardscope::gui
