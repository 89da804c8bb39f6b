#include "profiling/metrics/figure_text.h"

#include <gtest/gtest.h>

namespace shardscope::profiling {
namespace {

// The unit follows the size: a slow Gloo link on two CPU cores reads in MB/s, never "0.00 GB/s".
TEST(FigureText, RateTakesTheUnitThatFits) {
  EXPECT_EQ(format_rate(850), "850 B/s");
  EXPECT_EQ(format_rate(12'345), "12.3 kB/s");
  EXPECT_EQ(format_rate(4'560'000), "4.56 MB/s");
  EXPECT_EQ(format_gbps(0.0042), "4.20 MB/s");
  EXPECT_EQ(format_gbps(370), "370 GB/s");
  EXPECT_EQ(format_gbps(3.7e3), "3.70 TB/s");
  EXPECT_EQ(format_rate(0), "0 B/s");
}

// Rounding that reaches the next unit moves to it: 999.7 kB/s is 1.00 MB/s, not "1000 kB/s".
TEST(FigureText, RoundingCarriesIntoTheNextUnit) {
  EXPECT_EQ(format_rate(999'700), "1.00 MB/s");
  EXPECT_EQ(format_rate(99'960), "100 kB/s");
}

// Every busbw a CPU run shows, from 1 B/s to 1 TB/s: three significant digits, never all zeros.
TEST(FigureText, NoRateReadsZero) {
  for (double r = 1; r < 1e12; r *= 1.37) {
    const std::string text = format_rate(r);
    EXPECT_NE(text.substr(0, 4), "0.00") << r;
    const double shown = std::stod(text);
    EXPECT_GE(shown, 1.0) << text;
    EXPECT_LT(shown, 1000.0) << text;
  }
}

// MFU of a CPU run projected onto an H100 is a fraction of a percent: its digits show.
TEST(FigureText, PercentKeepsSignificantDigits) {
  EXPECT_EQ(format_percent(0.4512), "45.1 %");
  EXPECT_EQ(format_percent(0.00123), "0.123 %");
  EXPECT_EQ(format_percent(0.0000456), "0.00456 %");
  EXPECT_EQ(format_percent(1.0), "100 %");
  EXPECT_EQ(format_percent(0.0), "0 %");
  EXPECT_EQ(format_percent(0.000999), "0.0999 %");
  EXPECT_NE(format_percent(0.0004), "0.0 %");
}

}  // namespace
}  // namespace shardscope::profiling
