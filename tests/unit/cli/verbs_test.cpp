// SPDX-License-Identifier: Apache-2.0
// `cohort`'s verb table (cli/commands/verbs.cpp): a command line that names a verb
// builds only that verb's group, anything else builds all of them.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "commands/commands.h"

namespace cohort::cli {
namespace {

std::vector<std::string> Registered(std::string_view verb) {
  CLI::App app{"cohort"};
  int exit_code = 0;
  const std::vector<std::string> words{std::string(verb)};
  AddCommands(app, exit_code, words);
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  std::ranges::sort(names);
  return names;
}

TEST(VerbsTest, AnythingButAVerbRegistersEveryVerb) {
  const std::vector<std::string_view> verbs = VerbNames();
  std::vector<std::string> expected(verbs.begin(), verbs.end());
  std::ranges::sort(expected);
  EXPECT_EQ(Registered(""), expected);
  EXPECT_EQ(Registered("--help"), expected);
  EXPECT_EQ(Registered("sumbit"), expected);
}

TEST(VerbsTest, AVerbRegistersOnlyItsGroup) {
  EXPECT_EQ(Registered("submit"), (std::vector<std::string>{"submit"}));
  EXPECT_EQ(Registered("queue"), (std::vector<std::string>{"queue"}));
  EXPECT_EQ(Registered("release"),
            (std::vector<std::string>{"checkpoint-done", "hold", "release", "requeue"}));
  EXPECT_EQ(Registered("resume"), (std::vector<std::string>{"down", "drain", "resume"}));
}

// A verb builds its own group, and every verb of that group builds the same
// one (with the first test: the table names every verb its group defines).
TEST(VerbsTest, EveryVerbBuildsItsOwnGroup) {
  for (const std::string_view verb : VerbNames()) {
    const std::vector<std::string> group = Registered(verb);
    EXPECT_TRUE(std::ranges::find(group, verb) != group.end()) << verb;
    for (const std::string& other : group) EXPECT_EQ(Registered(other), group) << verb;
  }
}

}  // namespace
}  // namespace cohort::cli
