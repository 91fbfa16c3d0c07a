// SPDX-License-Identifier: Apache-2.0
#include "job_option_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "job_options.h"

namespace cohort::cli {
namespace {

// Parses `words` as `cohort submit` would (CLI11 reads them from the back)
// and returns the unsupported options it saw.
std::vector<std::string> UnsupportedGiven(std::vector<std::string> words) {
  CLI::App app;
  JobOptions options;
  const std::vector<UnsupportedOption> unsupported = AddJobOptions(app, options, words);
  TakeCommandVerbatim(app, "SCRIPT", "");
  std::vector<std::string> reversed(words.rbegin(), words.rend());
  app.parse(reversed);
  return GivenUnsupported(unsupported);
}

TEST(JobOptionTableTest, UnsupportedOptionsAreRegisteredOnlyWhenTheWordsMayNameOne) {
  using Names = std::vector<std::string>;
  // Nothing that could name one: none registered, and the line still parses.
  CLI::App app;
  JobOptions options;
  const std::vector<std::string> plain{"-N", "4", "-o", "/dev/null", "--gpus-per-node=8",
                                       "--",  "sh", "-c", "echo -i"};
  EXPECT_TRUE(AddJobOptions(app, options, plain).empty());
  EXPECT_EQ(UnsupportedGiven(plain), Names{});
  // Every way of giving one is still found, and warned about.
  EXPECT_EQ(UnsupportedGiven({"--mail-type=END", "-N", "2", "x.sh"}), Names{"--mail-type"});
  EXPECT_EQ(UnsupportedGiven({"--mail-type", "END", "x.sh"}), Names{"--mail-type"});
  EXPECT_EQ(UnsupportedGiven({"-G2", "x.sh"}), Names{"--gpus"});
  EXPECT_EQ(UnsupportedGiven({"-N", "1", "-Qv", "x.sh"}), (Names{"--quiet", "--verbose"}));
  EXPECT_EQ(UnsupportedGiven({"--nice", "--", "true"}), Names{"--nice"});
  // A word that only looks like one registers them, harmlessly.
  EXPECT_EQ(UnsupportedGiven({"-N", "1", "x.sh", "--mail-type"}), Names{});
}

}  // namespace
}  // namespace cohort::cli
