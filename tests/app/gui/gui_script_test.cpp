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

}  // namespace
}  // namespace shardscope::gui
