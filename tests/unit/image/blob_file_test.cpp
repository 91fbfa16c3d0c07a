// SPDX-License-Identifier: Apache-2.0
#include "blob_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "manifest.h"
#include "sha256.h"

namespace cohort::image {
namespace {

// The descriptor of the 5 bytes "hello".
Descriptor Hello() {
  Descriptor blob;
  blob.digest = Sha256Digest("hello");
  blob.size = 5;
  return blob;
}

class BlobFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char path[] = "/tmp/cohort-blob-XXXXXX";
    const int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    ::close(fd);
    path_ = path;
  }
  void TearDown() override { ::unlink(path_.c_str()); }
  std::string path_;
};

TEST_F(BlobFileTest, AcceptsTheBytesItsDigestNames) {
  const Descriptor blob = Hello();
  absl::StatusOr<BlobFile> file = BlobFile::Create(path_, blob, "layer");
  ASSERT_TRUE(file.ok());
  EXPECT_TRUE(file->Write("hel"));
  EXPECT_TRUE(file->Write("lo"));
  EXPECT_TRUE(file->Finish().ok());
  EXPECT_EQ(*Sha256OfFile(path_), blob.digest);
}

TEST_F(BlobFileTest, ADigestMismatchFails) {
  const Descriptor blob = Hello();
  absl::StatusOr<BlobFile> file = BlobFile::Create(path_, blob, "layer");
  ASSERT_TRUE(file.ok());
  EXPECT_TRUE(file->Write("HELLO"));
  const absl::Status status = file->Finish();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "layer " + blob.digest + " does not match its digest (got " +
                                  Sha256Digest("HELLO") + ")");
}

TEST_F(BlobFileTest, StopsAtTheDeclaredSize) {
  const Descriptor blob = Hello();
  absl::StatusOr<BlobFile> file = BlobFile::Create(path_, blob, "config");
  ASSERT_TRUE(file.ok());
  EXPECT_FALSE(file->Write("hello, world"));
  EXPECT_NE(file->error().message().find("longer than the 5 bytes"), std::string::npos);
  absl::StatusOr<BlobFile> short_file = BlobFile::Create(path_, blob, "config");
  ASSERT_TRUE(short_file.ok());
  EXPECT_TRUE(short_file->Write("hel"));
  EXPECT_NE(short_file->Finish().message().find("is 3 bytes, not the 5"), std::string::npos);
}

TEST(ManifestTest, ChoosesThePlatformFromAnIndex) {
  const std::string a = "sha256:" + std::string(64, 'a');
  const std::string b = "sha256:" + std::string(64, 'b');
  const std::string index =
      R"({"schemaVersion":2,"manifests":[)"
      R"({"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":")" +
      a +
      R"(","size":10,"platform":{"os":"linux","architecture":"arm64","variant":"v8"}},)"
      R"({"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":")" +
      b + R"(","size":10,"platform":{"os":"linux","architecture":"amd64"}}]})";
  absl::StatusOr<Manifest> parsed = ParseManifest(kOciIndex, index, 1 << 20);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_TRUE(parsed->is_index);
  EXPECT_EQ(ChoosePlatform(*parsed, LinuxPlatform("x86_64"))->digest, b);
  EXPECT_EQ(ChoosePlatform(*parsed, LinuxPlatform("aarch64"))->digest, a);
  EXPECT_EQ(ChoosePlatform(*parsed, *ParsePlatform("linux/arm64/v8"))->digest, a);
  const absl::StatusOr<Descriptor> none = ChoosePlatform(*parsed, *ParsePlatform("linux/s390x"));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("linux/arm64/v8, linux/amd64"), std::string::npos);
}

TEST(ManifestTest, BoundsAndMediaTypes) {
  const std::string config = "sha256:" + std::string(64, 'c');
  const std::string layer = "sha256:" + std::string(64, 'd');
  const std::string manifest = R"({"schemaVersion":2,"config":{"mediaType":)"
                               R"("application/vnd.oci.image.config.v1+json","digest":")" +
                               config +
                               R"(","size":100},"layers":[{"mediaType":)"
                               R"("application/vnd.oci.image.layer.v1.tar+gzip","digest":")" +
                               layer + R"(","size":5000}]})";
  absl::StatusOr<Manifest> parsed = ParseManifest(kOciManifest, manifest, 1 << 20);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->layers.size(), 1U);
  EXPECT_EQ(ParseManifest(kOciManifest, manifest, 4000).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      ParseManifest("application/vnd.docker.distribution.manifest.v1+prettyjws", manifest, 1 << 20)
          .status()
          .code(),
      absl::StatusCode::kUnimplemented);
  // Without a Content-Type, the document's fields tell.
  EXPECT_TRUE(ParseManifest("", manifest, 1 << 20).ok());
  EXPECT_FALSE(ParseManifest(kOciManifest, "not json", 1 << 20).ok());
  const std::string sha512 = R"({"config":{"digest":"sha512:ab","size":1},"layers":[]})";
  EXPECT_NE(ParseManifest(kOciManifest, sha512, 1 << 20).status().message().find("sha256"),
            std::string::npos);
}

TEST(ManifestTest, ImageConfig) {
  absl::StatusOr<ImageConfig> config = ParseImageConfig(
      R"({"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin"],"Entrypoint":["/e"],)"
      R"("Cmd":["sh"],"WorkingDir":"/w","User":"1000:1000"},"rootfs":{"diff_ids":["a","b"]}})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->env, std::vector<std::string>{"PATH=/bin"});
  EXPECT_EQ(config->entrypoint, std::vector<std::string>{"/e"});
  EXPECT_EQ(config->cmd, std::vector<std::string>{"sh"});
  EXPECT_EQ(config->working_dir, "/w");
  EXPECT_EQ(config->user, "1000:1000");
  EXPECT_EQ(config->diff_ids, 2);
}

}  // namespace
}  // namespace cohort::image
