// The app's hostile inputs (issue 33), refused before any window opens: a FIFO as --script once
// blocked, and --state to a path that cannot be written once exited 0 with no file and no word.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "tests/support/cli_runner.h"
#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

namespace fs = std::filesystem;

TEST(GuiHostile, ScriptsAndStatePathsAreCheckedBeforeTheWindow) {
  const fs::path dir = test::test_temp_dir();
  const fs::path script = dir / "s.script", fifo = dir / "fifo";
  std::ofstream(script) << "fit\n";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  struct Case {
    std::vector<std::string> args;
    std::string phrase;
  };
  for (const Case& c : std::vector<Case>{
           {{"gui", "--script", fifo.string()}, "--script: " + fifo.string() + " is a FIFO"},
           {{"gui", "--script", script.string(), "--state", (dir / "no" / "s.json").string()},
            "--state: no folder"},
           {{"gui", "--script", script.string(), "--state", fifo.string()},
            "--state: " + fifo.string() + " is not a regular file"},
           {{"gui", "--script", script.string(), "--state", dir.string()},
            "--state: " + dir.string() + " is a directory"},
           // A window no display holds (an X error once, after the window failed to map), or a
           // count of frames that would hold the app for a year.
           {{"gui", "--script", script.string(), "--size", "100000x100000"},
            "--size: each side from 200 to 8192 pixels, got '100000x100000'"},
           {{"gui", "--script", script.string(), "--size", "800x600px"},
            "--size: expected WIDTHxHEIGHT"},
           {{"gui", "--script", script.string(), "--frames", "2000000000"}, "--frames"},
           {{"gui", "--script", script.string(), "--frames", "-1"}, "not in range 0 to 3600"},
       }) {
    const test::CliResult r = test::cli(c.args);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(c.phrase), std::string::npos) << r.err;
  }
  EXPECT_TRUE(fs::is_fifo(fifo));
}

}  // namespace
}  // namespace shardscope
