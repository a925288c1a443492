// The STITCH_* environment table and the one boolean parser every toggle shares.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <string>

#include "runtime/support/env.h"
#include "runtime/support/error.h"

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

// The README's table of variables ("Environment variables") and the library's are the same list,
// both ways: a variable Stitch reads is documented, a documented one is known (not warned about as
// a typo) and checked by stitch_environment_check.
TEST(Env, TheReadmeListsEveryVariableAndNoOther) {
  std::ifstream in(std::string(STITCH_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(in) << "README.md not found under " << STITCH_SOURCE_DIR;
  std::string line;
  bool inSection = false;
  std::set<std::string> documented;
  const std::regex name("`(STITCH_[A-Z0-9_]+)`");
  while (std::getline(in, line)) {
    if (line.starts_with("## ")) inSection = line == "## Environment variables";
    // Rows of the table: the first cell names the variable(s).
    if (!inSection || !line.starts_with("| `STITCH_")) continue;
    const std::string first = line.substr(0, line.find('|', 1));
    for (std::sregex_iterator it(first.begin(), first.end(), name), end; it != end; ++it)
      documented.insert((*it)[1]);
  }
  std::set<std::string> known;
  for (const Variable& v : knownVariables()) known.insert(std::string(v.name));
  for (const std::string& k : known)
    EXPECT_TRUE(documented.count(k)) << k << " is read by Stitch but not in the README's table";
  for (const std::string& d : documented)
    EXPECT_TRUE(known.count(d)) << d << " is in the README's table but not in support/env.cpp";
  EXPECT_GE(documented.size(), 20u);
}

}  // namespace
}  // namespace stitch::env
