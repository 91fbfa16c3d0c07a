// SPDX-License-Identifier: Apache-2.0
#include "spec/job_option_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "spec/job_options.h"

namespace cohort::cli {
namespace {

// Parses `words` as `cohort submit` would (CLI11 reads them from the back)
// and returns the options Cohort does not implement that it saw, and
// CheckNotImplemented's verdict.
struct Seen {
  std::vector<std::string> names;
  absl::Status verdict;
};
Seen Parse(std::vector<std::string> words) {
  CLI::App app;
  JobOptions options;
  const std::vector<UnsupportedOption> unsupported = AddJobOptions(app, options, words);
  TakeCommandVerbatim(app, "SCRIPT", "");
  std::vector<std::string> reversed(words.rbegin(), words.rend());
  app.parse(reversed);
  Seen seen;
  for (const UnsupportedOption& u : unsupported) {
    if (u.option->count() > 0) seen.names.push_back(u.name);
  }
  seen.verdict = CheckNotImplemented(unsupported);
  return seen;
}
std::vector<std::string> UnsupportedGiven(std::vector<std::string> words) {
  return Parse(std::move(words)).names;
}

TEST(JobOptionTableTest, UnsupportedOptionsAreRegisteredOnlyWhenTheWordsMayNameOne) {
  using Names = std::vector<std::string>;
  // Nothing that could name one: none registered, and the line still parses.
  CLI::App app;
  JobOptions options;
  const std::vector<std::string> plain{"-N", "4",  "-o", "/dev/null", "--gpus-per-node=8",
                                       "--", "sh", "-c", "echo -i"};
  EXPECT_TRUE(AddJobOptions(app, options, plain).empty());
  EXPECT_EQ(UnsupportedGiven(plain), Names{});
  // Every way of giving one is still found.
  EXPECT_EQ(UnsupportedGiven({"--licenses=a", "-N", "2", "x.sh"}), Names{"--licenses"});
  EXPECT_EQ(UnsupportedGiven({"--licenses", "a", "x.sh"}), Names{"--licenses"});
  EXPECT_EQ(UnsupportedGiven({"-La", "x.sh"}), Names{"--licenses"});
  EXPECT_EQ(UnsupportedGiven({"-N", "1", "-Qv", "x.sh"}), (Names{"--quiet", "--verbose"}));
  EXPECT_EQ(UnsupportedGiven({"--nice", "--", "true"}), Names{"--nice"});
  // A word that only looks like one registers them, harmlessly.
  EXPECT_EQ(UnsupportedGiven({"-N", "1", "x.sh", "--licenses"}), Names{});
}

TEST(JobOptionTableTest, OptionsThatChangeAJobAreRefusedWithTheAlternative) {
  const Seen nice = Parse({"--nice=10", "x.sh"});
  EXPECT_EQ(nice.verdict.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(nice.verdict.message(), "--nice is not supported; use -q/--qos for a lower priority");
  // Harmless ones are taken and change nothing.
  EXPECT_TRUE(Parse({"-Q", "--acctg-freq=30", "x.sh"}).verdict.ok());
}

TEST(JobOptionTableTest, EveryEntrySaysWhatToDoOrWhyItIsHarmless) {
  for (const SbatchOption& option : NotImplementedOptions()) {
    EXPECT_NE(std::string_view(option.text), "") << option.names;
    EXPECT_TRUE(std::string_view(option.names).find("--") != std::string_view::npos)
        << option.names;
  }
}

}  // namespace
}  // namespace cohort::cli

namespace cohort::cli {
namespace {

// `words` as `cohort submit` parses them, the script (or command) in
// `script`: `--exclusive` as Slurm's getopt reads it, a mode only after
// `=`, and the others.
JobOptions ParseWords(std::vector<std::string> words, std::string* script = nullptr) {
  CLI::App app;
  JobOptions options;
  AddJobOptions(app, options, words);
  std::string command;
  app.add_option("script", command);
  std::vector<std::string> reversed(words.rbegin(), words.rend());
  app.parse(reversed);
  if (script != nullptr) *script = command;
  return options;
}

TEST(JobOptionTableTest, ExclusiveTakesAModeOnlyAfterAnEqualsSign) {
  std::string script;
  JobOptions whole = ParseWords({"--exclusive", "job.sh"}, &script);
  EXPECT_TRUE(whole.exclusive);
  EXPECT_FALSE(whole.exclusive_topo);
  EXPECT_EQ(script, "job.sh");
  JobOptions topo = ParseWords({"--exclusive=topo", "job.sh"});
  EXPECT_TRUE(topo.exclusive);
  EXPECT_TRUE(topo.exclusive_topo);
  EXPECT_FALSE(ParseWords({"job.sh"}).exclusive);
  try {
    ParseWords({"--exclusive=user", "job.sh"});
    ADD_FAILURE() << "--exclusive=user was taken";
  } catch (const CLI::ValidationError& e) {
    EXPECT_NE(std::string(e.what()).find("--exclusive=user is not supported"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ParseWords({"--exclusive=blocks", "job.sh"}), CLI::ValidationError);
}

}  // namespace
}  // namespace cohort::cli

namespace cohort::cli {
namespace {

// -O/--overcommit (and SLURM_OVERCOMMIT's sbatch twin) reach the spec; the
// --test-only summary says so.
TEST(JobOptionTableTest, OvercommitReachesTheSpec) {
  for (const std::vector<std::string>& words :
       {std::vector<std::string>{"-O", "-n", "8", "job.sh"},
        std::vector<std::string>{"--overcommit", "job.sh"}}) {
    const JobOptions options = ParseWords(words);
    EXPECT_TRUE(options.overcommit) << words.front();
    absl::StatusOr<v1::JobSpec> spec = BuildJobSpec(options, "job");
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_TRUE(spec->overcommit());
  }
  const char* const environment[] = {"SBATCH_OVERCOMMIT=1", nullptr};
  JobOptions from_env;
  ASSERT_TRUE(ApplyInputVariables("SBATCH_", from_env, environment).ok());
  EXPECT_TRUE(from_env.overcommit);
}

}  // namespace
}  // namespace cohort::cli
