#include "qloom/core/format.h"

#include <gtest/gtest.h>

namespace qloom {
namespace {

TEST(Format, Count) {
  EXPECT_EQ(format_count(0), "0");
  EXPECT_EQ(format_count(999), "999");
  EXPECT_EQ(format_count(1000), "1,000");
  EXPECT_EQ(format_count(260032), "260,032");
  EXPECT_EQ(format_count(18446744073709551615ULL), "18,446,744,073,709,551,615");
}

TEST(Format, Bytes) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1.00 KiB");
  EXPECT_EQ(format_bytes(524960), "512.7 KiB");
  EXPECT_EQ(format_bytes(1ULL << 30), "1.00 GiB");
}

TEST(Format, Duration) {
  EXPECT_EQ(format_duration(0.421), "0.42 s");
  EXPECT_EQ(format_duration(31.04), "31.0 s");
  EXPECT_EQ(format_duration(125), "2m05s");
  EXPECT_EQ(format_duration(3720), "1h02m");
  EXPECT_EQ(format_duration(-1), "?");
}

}  // namespace
}  // namespace qloom
