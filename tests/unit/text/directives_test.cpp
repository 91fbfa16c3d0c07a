// SPDX-License-Identifier: Apache-2.0
#include "cohort/text/directives.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace cohort::directives {
namespace {

using Words = std::vector<std::string>;

DirectiveResult Parse(std::string_view script) { return ParseDirectives(script, "job.sh"); }

// The words of every directive, in order; fails when there are diagnostics.
std::vector<Words> CleanWords(std::string_view script) {
  const DirectiveResult result = Parse(script);
  EXPECT_TRUE(result.diagnostics.All().empty()) << result.diagnostics.Format();
  std::vector<Words> out;
  for (const Directive& d : result.directives) out.push_back(d.args);
  return out;
}

TEST(DirectivesTest, ReadsSbatchAndCohortLinesWithTheirLineNumbers) {
  const DirectiveResult result = Parse(
      "#!/bin/bash\n"
      "#SBATCH -N 4\n"
      "\n"
      "# a comment\n"
      "#COHORT --gpus-per-node=8 --exclusive\n"
      "#SBATCH --job-name=train\n"
      "srun python train.py\n");
  EXPECT_TRUE(result.diagnostics.All().empty()) << result.diagnostics.Format();
  ASSERT_EQ(result.directives.size(), 3U);
  EXPECT_EQ(result.directives[0].line, 2);
  EXPECT_EQ(result.directives[0].prefix, Prefix::kSbatch);
  EXPECT_EQ(result.directives[0].args, (Words{"-N", "4"}));
  EXPECT_EQ(result.directives[1].line, 5);
  EXPECT_EQ(result.directives[1].prefix, Prefix::kCohort);
  EXPECT_EQ(result.directives[1].args, (Words{"--gpus-per-node=8", "--exclusive"}));
  EXPECT_EQ(result.directives[2].line, 6);
  EXPECT_EQ(result.directives[2].args, (Words{"--job-name=train"}));
}

TEST(DirectivesTest, StopsAtTheFirstCommandAndWarnsAboutLaterDirectives) {
  const DirectiveResult result = Parse(
      "#!/bin/bash\n"
      "#SBATCH -N 2\n"
      "echo start\n"
      "#SBATCH -N 8\n"
      "# SBATCH -N 9 is a comment\n");
  ASSERT_EQ(result.directives.size(), 1U);
  EXPECT_EQ(result.directives[0].args, (Words{"-N", "2"}));
  ASSERT_EQ(result.diagnostics.All().size(), 1U);
  const Diagnostic& d = result.diagnostics.All()[0];
  EXPECT_EQ(d.severity, Severity::kWarning);
  EXPECT_EQ(d.where.line, 4);
  EXPECT_EQ(d.message, "#SBATCH after the first command (line 3) is ignored");
  EXPECT_FALSE(result.diagnostics.HasErrors());
}

TEST(DirectivesTest, QuotesGroupBlanksAndBackslashesEscape) {
  EXPECT_EQ(CleanWords("#SBATCH -J \"my job\" --comment='a b' x\\ y \"say \\\"hi\\\"\"\n"),
            (std::vector<Words>{{"-J", "my job", "--comment=a b", "x y", "say \"hi\""}}));
  EXPECT_EQ(CleanWords("#SBATCH --output=\"/tmp/out dir/%j.out\"\n"),
            (std::vector<Words>{{"--output=/tmp/out dir/%j.out"}}));
  EXPECT_EQ(CleanWords("#SBATCH -J \"\"\n"), (std::vector<Words>{{"-J", ""}}));
  EXPECT_EQ(CleanWords("#SBATCH -J 'it''s'\n"), (std::vector<Words>{{"-J", "its"}}));
}

TEST(DirectivesTest, CommentsStartAtAWordThatBeginsWithHash) {
  EXPECT_EQ(CleanWords("#SBATCH -N 4   # four nodes\n#SBATCH -J run#2 '#x' \\#y\n"),
            (std::vector<Words>{{"-N", "4"}, {"-J", "run#2", "#x", "#y"}}));
  EXPECT_EQ(CleanWords("#SBATCH # only a comment\n#SBATCH\n#SBATCH   \n"), std::vector<Words>{});
}

TEST(DirectivesTest, TabsAndCrLfAreBlanks) {
  EXPECT_EQ(CleanWords("#!/bin/sh\r\n#SBATCH\t-N\t2\r\n#SBATCH -J a\r\n\r\nhostname\r\n"),
            (std::vector<Words>{{"-N", "2"}, {"-J", "a"}}));
}

TEST(DirectivesTest, UnmatchedQuoteIsAnErrorNamingLineAndColumn) {
  const DirectiveResult result = Parse("#!/bin/bash\n#SBATCH -J 'oops\n#SBATCH -N 2\n");
  ASSERT_EQ(result.diagnostics.ErrorCount(), 1);
  const Diagnostic& d = result.diagnostics.All()[0];
  EXPECT_EQ(d.where.file, "job.sh");
  EXPECT_EQ(d.where.line, 2);
  EXPECT_EQ(d.where.column, 12);
  EXPECT_EQ(d.message, "unmatched ' in the #SBATCH line");
  ASSERT_EQ(result.directives.size(), 1U);
  EXPECT_EQ(result.directives[0].line, 3);
}

TEST(DirectivesTest, LookalikesAreWarnedAboutAndNotRead) {
  const DirectiveResult result = Parse(
      "#!/bin/bash\n"
      "  #SBATCH -N 4\n"
      "#sbatch -N 5\n"
      "#SBATCHX -N 6\n"
      "##SBATCH -N 7\n"
      "#SBATCH -N 8\n");
  ASSERT_EQ(result.directives.size(), 1U);
  EXPECT_EQ(result.directives[0].args, (Words{"-N", "8"}));
  ASSERT_EQ(result.diagnostics.All().size(), 2U);
  EXPECT_EQ(result.diagnostics.All()[0].where.line, 2);
  EXPECT_EQ(result.diagnostics.All()[0].where.column, 3);
  EXPECT_EQ(result.diagnostics.All()[0].message, "an indented #SBATCH is ignored");
  EXPECT_EQ(result.diagnostics.All()[1].where.line, 3);
  EXPECT_EQ(result.diagnostics.All()[1].message, "#sbatch is not a directive and is ignored");
  EXPECT_EQ(result.diagnostics.All()[1].hint, "write #SBATCH in capitals");
}

TEST(DirectivesTest, ScriptsWithoutDirectivesOrWithoutNewlineAtTheEnd) {
  EXPECT_EQ(CleanWords(""), std::vector<Words>{});
  EXPECT_EQ(CleanWords("hostname"), std::vector<Words>{});
  EXPECT_EQ(CleanWords("#!/bin/bash\n#COHORT -N 3"), (std::vector<Words>{{"-N", "3"}}));
}

TEST(DirectivesTest, PrefixText) {
  EXPECT_EQ(PrefixText(Prefix::kSbatch), "#SBATCH");
  EXPECT_EQ(PrefixText(Prefix::kCohort), "#COHORT");
}

}  // namespace
}  // namespace cohort::directives
