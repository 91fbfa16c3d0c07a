// SPDX-License-Identifier: Apache-2.0
#include "image_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "file_tree.h"

namespace cohort::image {
namespace {

namespace fs = std::filesystem;

std::string Digest(char c) { return "sha256:" + std::string(64, c); }

class ImageCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char folder[] = "/tmp/cohort-cache-XXXXXX";
    ASSERT_NE(::mkdtemp(folder), nullptr);
    ASSERT_EQ(::chmod(folder, 0755), 0);
    dir_ = folder;
  }
  void TearDown() override { EXPECT_TRUE(RemoveTree(dir_).ok()); }

  // An image as a pull lands it: staged, then committed; used at `used`.
  void AddImage(const ImageCache& cache, char c, std::int64_t bytes, time_t used) {
    absl::StatusOr<StagingFolder> staging = cache.MakeStaging();
    ASSERT_TRUE(staging.ok()) << staging.status();
    fs::create_directories(staging->path() + "/rootfs/bin");
    std::ofstream(staging->path() + "/image.json")
        << R"({"digest":")" << Digest(c) << R"(","rootfs":"x","bytes":)" << bytes << "}";
    std::ofstream(staging->path() + "/last-used");
    std::ofstream(staging->path() + "/in-use.lock");
    const timespec times[2] = {{used, 0}, {used, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, (staging->path() + "/last-used").c_str(), times, 0), 0);
    ASSERT_TRUE(cache.Commit(*staging, Digest(c)).ok());
  }

  std::string dir_;
};

TEST_F(ImageCacheTest, CommitLandsTheImageAndFindMarksItUsed) {
  absl::StatusOr<ImageCache> cache = ImageCache::Open(dir_ + "/cache");
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_FALSE(cache->Find(Digest('a')).has_value());
  AddImage(*cache, 'a', 10, 1000);
  EXPECT_TRUE(fs::is_directory(cache->ImageFolder(Digest('a')) + "/rootfs"));
  EXPECT_TRUE(fs::is_empty(dir_ + "/cache/tmp"));
  ASSERT_TRUE(cache->Find(Digest('a')).has_value());
  struct stat info {};
  ASSERT_EQ(::stat((cache->ImageFolder(Digest('a')) + "/last-used").c_str(), &info), 0);
  EXPECT_GT(info.st_mtime, 1000);
  // A second commit of the same image finds the first there.
  absl::StatusOr<StagingFolder> staging = cache->MakeStaging();
  ASSERT_TRUE(staging.ok());
  EXPECT_EQ(cache->Commit(*staging, Digest('a')).code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(ImageCacheTest, AStagingFolderIsRemovedUnlessCommitted) {
  absl::StatusOr<ImageCache> cache = ImageCache::Open(dir_ + "/cache");
  ASSERT_TRUE(cache.ok());
  {
    absl::StatusOr<StagingFolder> staging = cache->MakeStaging();
    ASSERT_TRUE(staging.ok());
    std::ofstream(staging->path() + "/partial") << "half a layer";
  }
  EXPECT_TRUE(fs::is_empty(dir_ + "/cache/tmp"));
}

TEST_F(ImageCacheTest, LitterIsRemovedUnlessLocked) {
  absl::StatusOr<ImageCache> cache = ImageCache::Open(dir_ + "/cache");
  ASSERT_TRUE(cache.ok());
  fs::create_directories(dir_ + "/cache/tmp/pull-crashed/rootfs");
  absl::StatusOr<StagingFolder> live = cache->MakeStaging();
  ASSERT_TRUE(live.ok());
  cache->RemoveLitter();
  EXPECT_FALSE(fs::exists(dir_ + "/cache/tmp/pull-crashed"));
  EXPECT_TRUE(fs::exists(live->path()));
}

TEST_F(ImageCacheTest, EvictionSkipsImagesInUse) {
  absl::StatusOr<ImageCache> cache = ImageCache::Open(dir_ + "/cache");
  ASSERT_TRUE(cache.ok());
  AddImage(*cache, 'a', 100, 1000);  // oldest, but in use
  AddImage(*cache, 'b', 100, 2000);
  AddImage(*cache, 'c', 100, 3000);
  AddImage(*cache, 'd', 100, 4000);  // the one just pulled
  const int held = ::open((cache->ImageFolder(Digest('a')) + "/in-use.lock").c_str(), O_RDONLY);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_SH), 0);
  absl::StatusOr<Eviction> eviction = cache->Evict(150, Digest('d'));
  ASSERT_TRUE(eviction.ok()) << eviction.status();
  EXPECT_EQ(eviction->removed, 2);
  EXPECT_EQ(eviction->in_use, 1);
  EXPECT_EQ(eviction->bytes, 200);
  EXPECT_TRUE(fs::exists(cache->ImageFolder(Digest('a'))));
  EXPECT_FALSE(fs::exists(cache->ImageFolder(Digest('b'))));
  EXPECT_FALSE(fs::exists(cache->ImageFolder(Digest('c'))));
  EXPECT_TRUE(fs::exists(cache->ImageFolder(Digest('d'))));
  EXPECT_TRUE(fs::is_empty(dir_ + "/cache/tmp"));
  ::close(held);
  eviction = cache->Evict(150, Digest('d'));
  ASSERT_TRUE(eviction.ok());
  EXPECT_EQ(eviction->removed, 1);
  EXPECT_FALSE(fs::exists(cache->ImageFolder(Digest('a'))));
}

TEST_F(ImageCacheTest, RootRefusesACacheOthersMayWrite) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  fs::create_directories(dir_ + "/open");
  ASSERT_EQ(::chmod((dir_ + "/open").c_str(), 0777), 0);
  const absl::StatusOr<ImageCache> cache = ImageCache::Open(dir_ + "/open");
  EXPECT_EQ(cache.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(cache.status().message().find("chmod 755"), std::string::npos);
}

}  // namespace
}  // namespace cohort::image
