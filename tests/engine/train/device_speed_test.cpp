// The cached device speed is believed only within physics: `{"cpu": 1e308}` once priced every
// projected step at 0.0 ms (issue 33), and a FIFO in its place would block every run.
#include "engine/train/device_speed.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

TEST(DeviceSpeed, AnImplausibleCachedSpeedIsMeasuredAgain) {
  const auto dir = test::test_temp_dir();
  setenv("SHARDSCOPE_CACHE", dir.c_str(), 1);
  for (const char* cached : {R"({"cpu": 1e308})", R"({"cpu": 1e-300})", R"({"cpu": -5})"}) {
    std::ofstream(dir / "device-speed.json") << cached;
    const double tflops = device_matmul_tflops("cpu");
    EXPECT_GT(tflops, 1e-4) << cached;
    EXPECT_LT(tflops, 1e5) << cached;
    std::ifstream in(dir / "device-speed.json");
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_DOUBLE_EQ(nlohmann::json::parse(text.str()).at("cpu").get<double>(), tflops) << cached;
  }
  unsetenv("SHARDSCOPE_CACHE");
}

TEST(DeviceSpeed, AFifoInPlaceOfTheCacheDoesNotBlock) {
  const auto dir = test::test_temp_dir();
  ASSERT_EQ(mkfifo((dir / "device-speed.json").c_str(), 0644), 0);
  setenv("SHARDSCOPE_CACHE", dir.c_str(), 1);
  const double tflops = device_matmul_tflops("cpu");
  unsetenv("SHARDSCOPE_CACHE");
  EXPECT_GT(tflops, 1e-4);
  struct stat info {};
  ASSERT_EQ(lstat((dir / "device-speed.json").c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode)) << "the FIFO was replaced";
}

}  // namespace
}  // namespace shardscope
