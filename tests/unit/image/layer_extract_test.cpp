// SPDX-License-Identifier: Apache-2.0
#include "layer_extract.h"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "file_tree.h"

namespace cohort::image {
namespace {

namespace fs = std::filesystem;

// One tar entry; a folder when `type` is AE_IFDIR, a symlink with AE_IFLNK,
// a hard link when `hardlink` is set.
struct Entry {
  std::string path{};
  std::string content{};
  unsigned type = AE_IFREG;
  std::string link{};
  std::string hardlink{};
};

Entry File(std::string path, std::string content = "x") {
  return {.path = std::move(path), .content = std::move(content)};
}
Entry Folder(std::string path) { return {.path = std::move(path), .type = AE_IFDIR}; }
Entry Symlink(std::string path, std::string target) {
  return {.path = std::move(path), .type = AE_IFLNK, .link = std::move(target)};
}

class LayerExtractTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char folder[] = "/tmp/cohort-layer-XXXXXX";
    ASSERT_NE(::mkdtemp(folder), nullptr);
    work_ = folder;
    rootfs_ = work_ + "/rootfs";
    outside_ = work_ + "/outside";
    fs::create_directories(rootfs_);
    fs::create_directories(outside_);
    std::ofstream(outside_ + "/victim") << "keep me";
  }
  void TearDown() override { EXPECT_TRUE(RemoveTree(work_).ok()); }

  // A gzip'd tar of `entries`, built in memory with libarchive's write API.
  std::string Layer(const std::vector<Entry>& entries) {
    std::vector<char> buffer(1 << 20);
    size_t used = 0;
    archive* writer = archive_write_new();
    archive_write_set_format_pax_restricted(writer);
    archive_write_add_filter_gzip(writer);
    archive_write_open_memory(writer, buffer.data(), buffer.size(), &used);
    for (const Entry& item : entries) {
      archive_entry* entry = archive_entry_new();
      archive_entry_set_pathname(entry, item.path.c_str());
      archive_entry_set_filetype(entry, item.type);
      archive_entry_set_perm(entry, item.type == AE_IFDIR ? 0755 : 0644);
      archive_entry_set_mtime(entry, 1700000000, 0);
      if (item.type == AE_IFLNK) archive_entry_set_symlink(entry, item.link.c_str());
      if (!item.hardlink.empty()) archive_entry_set_hardlink(entry, item.hardlink.c_str());
      const bool data = item.type == AE_IFREG && item.hardlink.empty();
      archive_entry_set_size(entry, data ? static_cast<la_int64_t>(item.content.size()) : 0);
      archive_write_header(writer, entry);
      if (data) archive_write_data(writer, item.content.data(), item.content.size());
      archive_entry_free(entry);
    }
    archive_write_close(writer);
    archive_write_free(writer);
    const std::string path = work_ + "/layer" + std::to_string(++layers_) + ".tar.gz";
    std::ofstream(path, std::ios::binary).write(buffer.data(), static_cast<std::streamsize>(used));
    return path;
  }

  absl::Status Apply(const std::vector<Entry>& entries) {
    return ExtractLayer(Layer(entries), "sha256:test", rootfs_, 1 << 30);
  }

  std::string Read(const std::string& relative) {
    std::ifstream in(rootfs_ + "/" + relative);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  std::vector<std::string> List(const std::string& relative) {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(rootfs_ + "/" + relative)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  std::string work_;
  std::string rootfs_;
  std::string outside_;
  int layers_ = 0;
};

TEST_F(LayerExtractTest, LayersApplyInOrderWithWhiteouts) {
  ASSERT_TRUE(Apply({Folder("etc"), File("etc/doomed"), File("etc/keep", "kept"), Folder("opt"),
                     Folder("opt/old"), File("opt/old/file"), Folder("opt/old/sub"),
                     File("opt/old/sub/deep"), File("./dotted", "v1")})
                  .ok());
  // This layer's own entries in an opaque folder stay, written before or
  // after the marker; earlier layers' go, in subfolders too.
  absl::Status status =
      Apply({File("opt/old/early", "mine"), File("etc/.wh.doomed", ""),
             File("opt/old/.wh..wh..opq", ""), Folder("opt/old/sub"), File("opt/old/sub/late"),
             File("dotted", "v2"), File("etc/.wh..wh.plnk", "")});
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_FALSE(fs::exists(rootfs_ + "/etc/doomed"));
  EXPECT_EQ(Read("etc/keep"), "kept");
  EXPECT_EQ(List("etc"), std::vector<std::string>{"keep"});
  EXPECT_EQ(List("opt/old"), (std::vector<std::string>{"early", "sub"}));
  EXPECT_EQ(List("opt/old/sub"), std::vector<std::string>{"late"});
  EXPECT_EQ(Read("dotted"), "v2");
}

TEST_F(LayerExtractTest, AnEntryReplacesWhatWasThere) {
  ASSERT_TRUE(Apply({Folder("x"), File("x/inside"), File("y"), Symlink("z", "y")}).ok());
  absl::Status status = Apply({File("x", "now a file"), Folder("y"), File("z", "now a file")});
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(Read("x"), "now a file");
  EXPECT_TRUE(fs::is_directory(rootfs_ + "/y"));
  EXPECT_FALSE(fs::is_symlink(rootfs_ + "/z"));
  EXPECT_EQ(Read("z"), "now a file");
}

TEST_F(LayerExtractTest, KeepsSymlinksAndHardLinks) {
  Entry hard = File("bin/ls");
  hard.hardlink = "bin/busybox";
  absl::Status status = Apply({Folder("bin"), File("bin/busybox", "elf"),
                               Symlink("bin/sh", "busybox"), hard, Symlink("abs", "/etc/passwd")});
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(fs::read_symlink(rootfs_ + "/bin/sh"), "busybox");
  EXPECT_EQ(fs::read_symlink(rootfs_ + "/abs"), "/etc/passwd");
  EXPECT_EQ(fs::hard_link_count(rootfs_ + "/bin/busybox"), 2U);
  EXPECT_EQ(Read("bin/ls"), "elf");
}

TEST_F(LayerExtractTest, RefusesDotDotAndAbsolutePaths) {
  absl::Status status = Apply({File("../outside/evil")});
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find("\"..\""), std::string::npos) << status;
  EXPECT_NE(status.message().find("sha256:test"), std::string::npos) << status;
  EXPECT_FALSE(fs::exists(outside_ + "/evil"));
  status = Apply({File(outside_ + "/evil")});
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find("absolute path"), std::string::npos) << status;
  EXPECT_FALSE(fs::exists(outside_ + "/evil"));
  Entry hard = File("link");
  hard.hardlink = "../outside/victim";
  status = Apply({hard});
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  status = Apply({File("etc/../../outside/.wh.victim", "")});
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_TRUE(fs::exists(outside_ + "/victim"));
}

TEST_F(LayerExtractTest, NeverFollowsASymlinkOutOfTheRoot) {
  ASSERT_TRUE(Apply({Symlink("escape", outside_), Symlink("relative", "../outside")}).ok());
  for (const std::string via : {"escape", "relative"}) {
    absl::Status status = Apply({File(via + "/pwned")});
    EXPECT_FALSE(status.ok()) << via;
    status = Apply({File(via + "/.wh.victim", "")});
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << via << ": " << status;
    status = Apply({File(via + "/.wh..wh..opq", "")});
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << via << ": " << status;
  }
  EXPECT_FALSE(fs::exists(outside_ + "/pwned"));
  EXPECT_TRUE(fs::exists(outside_ + "/victim"));
  // The symlink itself may be replaced by a folder: the entry then writes
  // inside the root.
  ASSERT_TRUE(Apply({Folder("escape"), File("escape/safe")}).ok());
  EXPECT_TRUE(fs::exists(rootfs_ + "/escape/safe"));
  EXPECT_FALSE(fs::exists(outside_ + "/safe"));
}

TEST_F(LayerExtractTest, BoundsTheUnpackedSize) {
  const absl::Status status =
      ExtractLayer(Layer({File("big", std::string(4096, 'x'))}), "sha256:test", rootfs_, 1000);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("more than 1000 bytes"), std::string::npos) << status;
}

TEST_F(LayerExtractTest, RefusesWhatIsNotATar) {
  const std::string path = work_ + "/garbage";
  std::ofstream(path) << "this is not a tar archive, not even close";
  const absl::Status status = ExtractLayer(path, "sha256:test", rootfs_, 1 << 20);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
}

TEST(LayerMediaTypeTest, TarLayersOnly) {
  EXPECT_TRUE(CheckLayerMediaType("application/vnd.oci.image.layer.v1.tar+gzip").ok());
  EXPECT_TRUE(CheckLayerMediaType("application/vnd.oci.image.layer.v1.tar+zstd").ok());
  EXPECT_TRUE(CheckLayerMediaType("application/vnd.oci.image.layer.v1.tar").ok());
  EXPECT_TRUE(CheckLayerMediaType("application/vnd.docker.image.rootfs.diff.tar.gzip").ok());
  const absl::Status foreign =
      CheckLayerMediaType("application/vnd.docker.image.rootfs.foreign.diff.tar.gzip");
  EXPECT_EQ(foreign.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(foreign.message().find("unsupported media type"), std::string::npos);
}

}  // namespace
}  // namespace cohort::image
