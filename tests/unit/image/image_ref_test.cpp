// SPDX-License-Identifier: Apache-2.0
#include "cohort/container/image_ref.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace cohort::container {
namespace {

ImageRef MustParse(std::string_view text) {
  absl::StatusOr<ImageSource> source = ParseImageReference(text);
  EXPECT_TRUE(source.ok()) << text << ": " << source.status();
  if (!source.ok()) return {};
  EXPECT_EQ(source->kind, SourceKind::kRegistry) << text;
  return source->ref;
}

std::string ErrorOf(std::string_view text) {
  absl::StatusOr<ImageSource> source = ParseImageReference(text);
  EXPECT_FALSE(source.ok()) << text << " parsed";
  if (source.ok()) return "";
  EXPECT_EQ(source.status().code(), absl::StatusCode::kInvalidArgument) << text;
  return std::string(source.status().message());
}

TEST(ImageRefTest, EnrootForm) {
  const ImageRef ref = MustParse("nvcr.io#nvidia/pytorch:24.07-py3");
  EXPECT_EQ(ref.registry, "nvcr.io");
  EXPECT_EQ(ref.repository, "nvidia/pytorch");
  EXPECT_EQ(ref.tag, "24.07-py3");
  EXPECT_EQ(ref.digest, "");
  EXPECT_EQ(ref.user, "");
  EXPECT_EQ(FormatImageReference(ref), "nvcr.io#nvidia/pytorch:24.07-py3");
}

TEST(ImageRefTest, RegistryWithPortAndUser) {
  const ImageRef ref = MustParse("alice@127.0.0.1:5000#tiny:1");
  EXPECT_EQ(ref.user, "alice");
  EXPECT_EQ(ref.registry, "127.0.0.1:5000");
  EXPECT_EQ(ref.repository, "tiny");
  EXPECT_EQ(ref.tag, "1");
  EXPECT_EQ(FormatImageReference(ref), "127.0.0.1:5000#tiny:1");
}

TEST(ImageRefTest, DockerHubDefaults) {
  const ImageRef ref = MustParse("ubuntu");
  EXPECT_EQ(ref.registry, "registry-1.docker.io");
  EXPECT_EQ(ref.repository, "library/ubuntu");
  EXPECT_EQ(ref.tag, "latest");
  EXPECT_EQ(MustParse("nvidia/cuda:12.4.1-base").repository, "nvidia/cuda");
  EXPECT_EQ(MustParse("docker.io#ubuntu:22.04").repository, "library/ubuntu");
  EXPECT_EQ(MustParse("user@ubuntu:22.04").user, "user");
}

TEST(ImageRefTest, Digest) {
  const std::string digest = "sha256:" + std::string(64, 'a');
  const ImageRef ref = MustParse("nvcr.io#nvidia/pytorch@" + digest);
  EXPECT_EQ(ref.digest, digest);
  EXPECT_EQ(ref.tag, "");
  EXPECT_EQ(FormatImageReference(ref), "nvcr.io#nvidia/pytorch@" + digest);
  EXPECT_EQ(MustParse("ubuntu@" + digest).user, "");
  EXPECT_EQ(MustParse("ubuntu:22.04@" + digest).digest, digest);
}

TEST(ImageRefTest, DockerForm) {
  ImageRef ref = MustParse("docker://nvcr.io/nvidia/pytorch:24.07-py3");
  EXPECT_EQ(ref.registry, "nvcr.io");
  EXPECT_EQ(ref.repository, "nvidia/pytorch");
  // The first component is a registry only with '.' or ':' or as localhost.
  ref = MustParse("docker://nvidia/cuda:12");
  EXPECT_EQ(ref.registry, "registry-1.docker.io");
  EXPECT_EQ(ref.repository, "nvidia/cuda");
  EXPECT_EQ(MustParse("docker://localhost/tiny").registry, "localhost");
  EXPECT_EQ(MustParse("docker://127.0.0.1:5000/a/b:c").registry, "127.0.0.1:5000");
  EXPECT_EQ(MustParse("docker://bob@ghcr.io/org/img").user, "bob");
  EXPECT_EQ(MustParse("docker://nvcr.io#nvidia/pytorch:1").registry, "nvcr.io");
}

TEST(ImageRefTest, Separators) {
  EXPECT_EQ(MustParse("a/b.c_d__e-f---g:t").repository, "a/b.c_d__e-f---g");
  EXPECT_NE(ErrorOf("a/b___c").find("join their parts"), std::string::npos);
  EXPECT_NE(ErrorOf("a/-b").find("start and end"), std::string::npos);
  EXPECT_NE(ErrorOf("a//b").find("empty path component"), std::string::npos);
}

TEST(ImageRefTest, BadFormsSayWhatAndHow) {
  EXPECT_EQ(ErrorOf("Foo#Bar"),
            "image \"Foo#Bar\": repository \"Bar\" must be lowercase; write "
            "[USER@][REGISTRY#]IMAGE[:TAG], e.g. nvcr.io#nvidia/pytorch:24.07-py3");
  EXPECT_NE(ErrorOf("nvcr.io#img:.bad").find("tag \".bad\""), std::string::npos);
  EXPECT_NE(ErrorOf("nvcr.io#img@sha256:abc").find("64 lowercase hex"), std::string::npos);
  EXPECT_NE(ErrorOf("bad host#img").find("registry \"bad host\""), std::string::npos);
  EXPECT_NE(ErrorOf("host:99999#img").find("HOST:PORT"), std::string::npos);
  EXPECT_NE(ErrorOf("a#b#c").find("'#' twice"), std::string::npos);
  EXPECT_NE(ErrorOf("").find("empty"), std::string::npos);
  EXPECT_NE(ErrorOf("docker://Nvcr.io/X").find("docker://[USER@][REGISTRY/]IMAGE"),
            std::string::npos);
  EXPECT_NE(ErrorOf(std::string(600, 'a')).find("over the limit of 512"), std::string::npos);
  EXPECT_NE(ErrorOf("img:" + std::string(129, 't')).find("1 to 128"), std::string::npos);
  EXPECT_NE(ErrorOf("pytorch.sqsh").find("./pytorch.sqsh"), std::string::npos);
  EXPECT_NE(ErrorOf("a\nb").find("\"a?b\""), std::string::npos);
}

TEST(ImageRefTest, LocalSources) {
  absl::StatusOr<ImageSource> source = ParseImageReference("/images/pytorch.sqsh");
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ(source->kind, SourceKind::kSquashfs);
  EXPECT_EQ(source->path, "/images/pytorch.sqsh");
  source = ParseImageReference("./pytorch.sqsh");
  ASSERT_TRUE(source.ok());
  EXPECT_EQ(source->kind, SourceKind::kSquashfs);
  source = ParseImageReference("images/pytorch.sqsh");
  ASSERT_TRUE(source.ok());
  EXPECT_EQ(source->kind, SourceKind::kSquashfs);
  source = ParseImageReference("oci-archive:/tmp/img.tar");
  ASSERT_TRUE(source.ok());
  EXPECT_EQ(source->kind, SourceKind::kOciLayout);
  EXPECT_EQ(source->path, "/tmp/img.tar");
  source = ParseImageReference("oci:layout");
  ASSERT_TRUE(source.ok());
  EXPECT_EQ(source->kind, SourceKind::kOciLayout);
  EXPECT_EQ(source->path, "layout");
  source = ParseImageReference("/srv/images/pytorch-oci");
  ASSERT_TRUE(source.ok());
  EXPECT_EQ(source->kind, SourceKind::kOciLayout);
  EXPECT_FALSE(ParseImageReference("oci:").ok());
}

}  // namespace
}  // namespace cohort::container
