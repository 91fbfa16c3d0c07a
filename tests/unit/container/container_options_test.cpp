// SPDX-License-Identifier: Apache-2.0
#include "cohort/container/container_options.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cohort::container {
namespace {

TEST(ContainerOptionsTest, MountsReadPyxisForms) {
  absl::StatusOr<std::vector<Mount>> mounts =
      ParseMounts("/lustre/data:/data:ro+nosuid,/scratch,tmpfs:/tmp/fast,./out:/out:bind+rslave");
  ASSERT_TRUE(mounts.ok()) << mounts.status();
  ASSERT_EQ(mounts->size(), 4U);
  EXPECT_EQ((*mounts)[0].source, "/lustre/data");
  EXPECT_EQ((*mounts)[0].target, "/data");
  EXPECT_TRUE((*mounts)[0].read_only);
  EXPECT_TRUE((*mounts)[0].nosuid);
  EXPECT_TRUE((*mounts)[0].recursive);
  // SRC alone mounts at the same path.
  EXPECT_EQ((*mounts)[1].target, "/scratch");
  EXPECT_FALSE((*mounts)[1].read_only);
  EXPECT_EQ((*mounts)[2].source, "tmpfs");
  EXPECT_FALSE((*mounts)[3].recursive);
  EXPECT_EQ((*mounts)[3].propagation, "rslave");
  // Written back, read again: the same mounts.
  absl::StatusOr<std::vector<Mount>> again = ParseMounts(FormatMounts(*mounts));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *mounts);
}

TEST(ContainerOptionsTest, BadMountsSayWhatIsWrongAndTheForm) {
  for (const auto& [text, words] : std::vector<std::pair<std::string, std::string>>{
           {"/a:/b,", "empty entry"},
           {"/a:b", "is not an absolute path"},
           {"data:/data", "neither a path nor tmpfs"},
           {"/a:/b:ro+fast", "\"fast\" is no mount flag"},
           {"/a/../etc:/b", ".."},
           {"/a:/b/../../c", ".."},
       }) {
    absl::StatusOr<std::vector<Mount>> mounts = ParseMounts(text);
    ASSERT_FALSE(mounts.ok()) << text;
    EXPECT_EQ(mounts.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(mounts.status().message().find(words), std::string::npos)
        << text << ": " << mounts.status().message();
    EXPECT_NE(mounts.status().message().find("--container-mounts"), std::string::npos);
  }
  std::string many;
  for (int i = 0; i <= kMaxMounts; ++i) many += fmt::format("{}/m{}:/m{}", i ? "," : "", i, i);
  EXPECT_FALSE(ParseMounts(many).ok());
}

TEST(ContainerOptionsTest, NamesTakePyxisFlags) {
  absl::StatusOr<ContainerName> plain = ParseContainerName("train");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->name, "train");
  EXPECT_EQ(plain->mode, NameMode::kAuto);
  for (const auto& [text, mode] :
       {std::pair{"a:auto", NameMode::kAuto}, std::pair{"a:create", NameMode::kCreate},
        std::pair{"a:exec", NameMode::kExec}, std::pair{"a:no_exec", NameMode::kNoExec},
        std::pair{"a:no_create", NameMode::kNoCreate}}) {
    absl::StatusOr<ContainerName> parsed = ParseContainerName(text);
    ASSERT_TRUE(parsed.ok()) << text;
    EXPECT_EQ(parsed->mode, mode) << text;
    EXPECT_EQ(fmt::format("a:{}", NameModeText(mode)), text);
  }
  for (const char* bad : {"", ":exec", "a:run", "../x", ".hidden", "a/b", "a b"}) {
    EXPECT_FALSE(ParseContainerName(bad).ok()) << bad;
  }
}

TEST(ContainerOptionsTest, EnvNamesAndWorkdirsAreChecked) {
  absl::StatusOr<std::vector<std::string>> names = ParseEnvNames("PATH,LD_LIBRARY_PATH,_X1");
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::string>{"PATH", "LD_LIBRARY_PATH", "_X1"}));
  for (const char* bad : {"", "PATH,", "1X", "A-B", "A=B"}) {
    EXPECT_FALSE(ParseEnvNames(bad).ok()) << bad;
  }
  EXPECT_TRUE(CheckWorkdir("/workspace").ok());
  for (const char* bad : {"", "workspace", "/a/../b"}) EXPECT_FALSE(CheckWorkdir(bad).ok()) << bad;
  for (const char* good : {"/scratch/trained.sqsh", "trained.sqsh", "out/x.sqsh"}) {
    EXPECT_TRUE(CheckSavePath(good).ok()) << good;
  }
  EXPECT_FALSE(CheckSavePath("").ok());
  EXPECT_FALSE(CheckSavePath("/scratch/").ok());
  EXPECT_FALSE(CheckSavePath(std::string_view("a\0b", 3)).ok());
  EXPECT_FALSE(CheckSavePath(std::string(5000, 'x')).ok());
  EXPECT_NE(CheckSavePath("/scratch/").message().find("--container-save"), std::string::npos);
}

}  // namespace
}  // namespace cohort::container
