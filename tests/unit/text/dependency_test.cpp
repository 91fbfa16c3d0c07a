// SPDX-License-Identifier: Apache-2.0
#include "cohort/text/dependency.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace cohort {
namespace {

Dependency MustParse(std::string_view text) {
  absl::StatusOr<Dependency> dependency = ParseDependency(text);
  EXPECT_TRUE(dependency.ok()) << text << ": " << dependency.status();
  return dependency.ok() ? *dependency : Dependency{};
}

std::string ErrorOf(std::string_view text) {
  absl::StatusOr<Dependency> dependency = ParseDependency(text);
  EXPECT_FALSE(dependency.ok()) << text << " parsed";
  if (dependency.ok()) return "";
  EXPECT_EQ(dependency.status().code(), absl::StatusCode::kInvalidArgument) << text;
  return std::string(dependency.status().message());
}

// `type:job[_task]` of each term, to compare in one line.
std::vector<std::string> Terms(const Dependency& dependency) {
  std::vector<std::string> out;
  for (const DependencyTerm& term : dependency.terms) {
    std::string text(DependencyTypeName(term.type));
    if (term.type != DependencyType::kSingleton) text += ":" + std::to_string(term.job);
    if (term.array_task >= 0) text += "_" + std::to_string(term.array_task);
    out.push_back(text);
  }
  return out;
}

using Strings = std::vector<std::string>;

TEST(DependencyTest, EmptyIsNoDependency) {
  const Dependency dependency = MustParse("");
  EXPECT_TRUE(dependency.terms.empty());
  EXPECT_FALSE(dependency.any_of);
}

TEST(DependencyTest, EachType) {
  EXPECT_EQ(Terms(MustParse("after:1")), (Strings{"after:1"}));
  EXPECT_EQ(Terms(MustParse("afterok:12")), (Strings{"afterok:12"}));
  EXPECT_EQ(Terms(MustParse("afternotok:3")), (Strings{"afternotok:3"}));
  EXPECT_EQ(Terms(MustParse("afterany:4")), (Strings{"afterany:4"}));
  EXPECT_EQ(Terms(MustParse("singleton")), (Strings{"singleton"}));
  EXPECT_EQ(Terms(MustParse("AfterOK:5")), (Strings{"afterok:5"}));  // types in any case
  const Dependency singleton = MustParse("singleton");
  ASSERT_EQ(singleton.terms.size(), 1U);
  EXPECT_EQ(singleton.terms[0].job, 0);
  EXPECT_EQ(singleton.terms[0].array_task, -1);
}

TEST(DependencyTest, SeveralIdsGiveSeveralTerms) {
  EXPECT_EQ(Terms(MustParse("after:5:6")), (Strings{"after:5", "after:6"}));
}

TEST(DependencyTest, AnArrayTask) {
  const Dependency dependency = MustParse("afterok:12_3");
  ASSERT_EQ(dependency.terms.size(), 1U);
  EXPECT_EQ(dependency.terms[0].job, 12);
  EXPECT_EQ(dependency.terms[0].array_task, 3);
  EXPECT_EQ(MustParse("afterok:12").terms[0].array_task, -1);
}

TEST(DependencyTest, CommaMeansAllAndQuestionMarkAny) {
  Dependency dependency = MustParse("afterany:1,singleton,afternotok:2_0");
  EXPECT_FALSE(dependency.any_of);
  EXPECT_EQ(Terms(dependency), (Strings{"afterany:1", "singleton", "afternotok:2_0"}));
  dependency = MustParse("afterok:1?afterany:2:3");
  EXPECT_TRUE(dependency.any_of);
  EXPECT_EQ(Terms(dependency), (Strings{"afterok:1", "afterany:2", "afterany:3"}));
}

TEST(DependencyTest, Errors) {
  EXPECT_EQ(ErrorOf("afterok"),
            "dependency: \"afterok\": afterok needs job ids, as afterok:12 or "
            "afterok:12:13");
  EXPECT_EQ(ErrorOf("afterok:"),
            "dependency: \"afterok:\": afterok needs job ids, as afterok:12 "
            "or afterok:12:13");
  EXPECT_EQ(ErrorOf("afterok:1:"),
            "dependency: \"afterok:1:\": an empty job id; write "
            "type:JOB[:JOB…], as afterok:12:13");
  EXPECT_EQ(ErrorOf("afterok:abc"),
            "dependency: \"afterok:abc\": \"abc\" is not a job id; ids are positive whole "
            "numbers, with _TASK for one task of an array (12_3)");
  EXPECT_TRUE(ErrorOf("afterok:0").starts_with("dependency: \"afterok:0\": \"0\" is not a job id"));
  EXPECT_TRUE(
      ErrorOf("afterok:-1").starts_with("dependency: \"afterok:-1\": \"-1\" is not a job id"));
  EXPECT_EQ(ErrorOf("afterok:12_x"),
            "dependency: \"afterok:12_x\": \"12_x\": the array task after '_' must be a whole "
            "number 0 or more, as 12_3");
  EXPECT_EQ(ErrorOf("afterok:12_"),
            "dependency: \"afterok:12_\": \"12_\": the array task after '_' must be a whole "
            "number 0 or more, as 12_3");
  EXPECT_EQ(ErrorOf("singleton:3"),
            "dependency: \"singleton:3\": singleton takes no job ids; write singleton alone");
  EXPECT_EQ(ErrorOf("afterok:1,afterany:2?after:3"),
            "dependency: \"afterok:1,afterany:2?after:3\": mixes ',' (all must hold) and '?' "
            "(any one is enough); use one of them");
  EXPECT_EQ(ErrorOf("before:3"),
            "dependency: \"before:3\": unknown dependency type \"before\"; use one of after, "
            "afterok, afternotok, afterany, singleton");
  EXPECT_EQ(ErrorOf("aftercorr:3"),
            "dependency: \"aftercorr:3\": Slurm's aftercorr is not supported; use one of after, "
            "afterok, afternotok, afterany, singleton");
  EXPECT_TRUE(
      ErrorOf("expand:3").starts_with("dependency: \"expand:3\": Slurm's expand is not supported"));
  EXPECT_EQ(ErrorOf("after:5+10"),
            "dependency: \"after:5+10\": Slurm's after:JOB+MINUTES is not supported; depend on "
            "the job starting (after:JOB) or ending (afterany:JOB)");
  EXPECT_EQ(ErrorOf("afterok:1,,afterok:2"),
            "dependency: an empty term; remove the extra ',' or '?' (terms are type:JOB or "
            "singleton)");
  EXPECT_EQ(ErrorOf("afterok:1?"),
            "dependency: an empty term; remove the extra ',' or '?' (terms are type:JOB or "
            "singleton)");
  EXPECT_TRUE(
      ErrorOf("afterok:99999999999999999999")
          .starts_with(
              "dependency: \"afterok:99999999999999999999\": \"99999999999999999999\" is not"));
}

TEST(DependencyTest, FormatWritesTheSyntaxBack) {
  for (const std::string_view text : {"after:5:6", "afterok:12_3,singleton,afterany:1",
                                      "afterok:1?afternotok:2:3_4", "singleton"}) {
    EXPECT_EQ(FormatDependency(MustParse(text)), text);
  }
  EXPECT_EQ(FormatDependency(Dependency{}), "");
  // Terms of one type that are not neighbours stay apart, in order.
  EXPECT_EQ(FormatDependency(MustParse("afterok:1,afterany:2,afterok:3")),
            "afterok:1,afterany:2,afterok:3");
}

TEST(DependencyTest, TypeNames) {
  EXPECT_EQ(DependencyTypeName(DependencyType::kAfter), "after");
  EXPECT_EQ(DependencyTypeName(DependencyType::kAfterOk), "afterok");
  EXPECT_EQ(DependencyTypeName(DependencyType::kAfterNotOk), "afternotok");
  EXPECT_EQ(DependencyTypeName(DependencyType::kAfterAny), "afterany");
  EXPECT_EQ(DependencyTypeName(DependencyType::kSingleton), "singleton");
}

}  // namespace
}  // namespace cohort
