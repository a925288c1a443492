// The STITCH_* environment table and the one boolean parser every toggle shares.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "support/env.h"
#include "support/error.h"

namespace stitch::env {
namespace {

TEST(Env, BooleansAcceptEverySpellingAndNothingElse) {
  for (const char* t : {"1", "true", "True", "TRUE", "yes", "Yes", "on", "ON"})
    EXPECT_EQ(parseBool(t), std::optional<bool>(true)) << t;
  for (const char* f : {"0", "false", "False", "no", "NO", "off", "Off"})
    EXPECT_EQ(parseBool(f), std::optional<bool>(false)) << f;
  for (const char* bad : {"", "2", "y", "n", "enable", " 1", "1 ", "truth"})
    EXPECT_EQ(parseBool(bad), std::nullopt) << "'" << bad << "'";
}

TEST(Env, GetBoolDefaultsWhenUnsetAndRejectsGarbage) {
  ::unsetenv("STITCH_TEST_BOOL");
  EXPECT_TRUE(getBool("STITCH_TEST_BOOL", true));
  EXPECT_FALSE(getBool("STITCH_TEST_BOOL", false));
  ::setenv("STITCH_TEST_BOOL", "off", 1);
  EXPECT_FALSE(getBool("STITCH_TEST_BOOL", true));
  ::setenv("STITCH_TEST_BOOL", "maybe", 1);
  try {
    (void)getBool("STITCH_TEST_BOOL", true);
    FAIL() << "maybe was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(e.message().find("STITCH_TEST_BOOL=maybe"), std::string::npos) << e.message();
  }
  ::unsetenv("STITCH_TEST_BOOL");
}

TEST(Env, UnknownVariablesAreListedAndKnownOnesAreNot) {
  ::setenv("STITCH_CAHCE", "0", 1);
  ::setenv("STITCH_BENCH_ANYTHING", "1", 1);  // harness prefixes are not reported
  ::setenv("STITCH_FUSION", "stitch", 1);
  auto unknown = unknownVariables();
  EXPECT_NE(std::find(unknown.begin(), unknown.end(), "STITCH_CAHCE"), unknown.end());
  EXPECT_EQ(std::find(unknown.begin(), unknown.end(), "STITCH_BENCH_ANYTHING"), unknown.end());
  EXPECT_EQ(std::find(unknown.begin(), unknown.end(), "STITCH_FUSION"), unknown.end());
  ::unsetenv("STITCH_CAHCE");
  ::unsetenv("STITCH_BENCH_ANYTHING");
  ::unsetenv("STITCH_FUSION");
  auto after = unknownVariables();
  EXPECT_EQ(std::find(after.begin(), after.end(), "STITCH_CAHCE"), after.end());
}

TEST(Env, TheTableNamesEachVariableOnce) {
  auto vars = knownVariables();
  for (size_t i = 0; i < vars.size(); ++i) {
    EXPECT_TRUE(vars[i].name.starts_with("STITCH_")) << vars[i].name;
    for (size_t j = 0; j < i; ++j) EXPECT_NE(vars[i].name, vars[j].name);
  }
}

}  // namespace
}  // namespace stitch::env
