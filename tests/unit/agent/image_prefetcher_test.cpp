// SPDX-License-Identifier: Apache-2.0
// The agent's pulls ahead, with a stand-in for cohort-image (a shell
// script that prints what cohort-image prints, counts its runs and can be
// told to fail or to wait): requests for one image and owner share one
// pull; an image's description comes back; a failure comes back in
// cohort-image's words; past the bound a request is answered at once; an
// agent that may not pull says why.
#include "image_prefetcher.h"

#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace cohort::agent {
namespace {

class ImagePrefetcherTest : public ::testing::Test {
 protected:
  ImagePrefetcherTest() {
    char pattern[] = "/tmp/cohort-prefetch-test.XXXXXX";
    if (::mkdtemp(pattern) != nullptr) dir_ = pattern;
    program_ = dir_ + "/cohort-image";
    std::ofstream script(program_);
    // Its arguments: pull --cache DIR ... -- REFERENCE. It counts each run,
    // waits while `hold` exists, and fails for references with "missing".
    script << "#!/bin/sh\n"
           << "echo run >>" << dir_ << "/runs\n"
           << "for last; do :; done\n"
           << "while [ -e " << dir_ << "/hold ]; do sleep 0.01; done\n"
           << "case \"$last\" in *missing*) echo \"cohort-image: $last: the registry has no such "
              "manifest (404)\" >&2; exit 1;; esac\n"
           << "echo '{\"reference\":\"'$last'\",\"digest\":\"sha256:abc\",\"rootfs\":\"/c/rootfs\","
              "\"bytes\":4096,\"cached\":false}'\n";
    script.close();
    std::filesystem::permissions(program_, std::filesystem::perms::owner_all);
  }
  ~ImagePrefetcherTest() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::unique_ptr<ImagePrefetcher> Make(bool may_pull = true) {
    step::ImageStore store;
    store.cache_dir = dir_;
    return std::make_unique<ImagePrefetcher>(loop_, reaper_, store, program_, dir_, may_pull);
  }
  bool RunUntil(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      loop_.restart();
      loop_.run_for(std::chrono::milliseconds(10));
    }
    return true;
  }
  [[nodiscard]] int Runs() const {
    std::ifstream in(dir_ + "/runs");
    std::string line;
    int n = 0;
    while (std::getline(in, line)) ++n;
    return n;
  }

  std::string dir_;
  std::string program_;
  boost::asio::io_context loop_;
  ChildReaper reaper_{loop_};
};

TEST_F(ImagePrefetcherTest, RequestsForOneImageShareOnePull) {
  reaper_.Start();
  std::unique_ptr<ImagePrefetcher> images = Make();
  std::ofstream(dir_ + "/hold").close();
  std::vector<ImagePrefetcher::Outcome> got;
  const auto collect = [&got](const ImagePrefetcher::Outcome& o) { got.push_back(o); };
  images->Pull(1000, "reg#tiny:1", collect);
  images->Pull(1000, "reg#tiny:1", collect);  // a second node of the same agent
  images->Pull(1001, "reg#tiny:1", collect);  // another owner: their own logins
  ASSERT_TRUE(RunUntil([&] { return Runs() == 2; }));
  std::filesystem::remove(dir_ + "/hold");
  ASSERT_TRUE(RunUntil([&] { return got.size() == 3; }));
  EXPECT_EQ(Runs(), 2);
  for (const ImagePrefetcher::Outcome& o : got) {
    EXPECT_TRUE(o.ok) << o.error;
    EXPECT_EQ(o.digest, "sha256:abc");
    EXPECT_EQ(o.bytes, 4096);
    EXPECT_FALSE(o.cached);
  }
  EXPECT_EQ(images->Running(), 0U);
  // Output files are removed once read.
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    EXPECT_FALSE(entry.path().filename().string().starts_with("image-ahead-")) << entry.path();
  }
  reaper_.Stop();
}

TEST_F(ImagePrefetcherTest, AFailureComesBackInCohortImagesWords) {
  reaper_.Start();
  std::unique_ptr<ImagePrefetcher> images = Make();
  std::optional<ImagePrefetcher::Outcome> got;
  images->Pull(1000, "reg#tiny:missing", [&got](const ImagePrefetcher::Outcome& o) { got = o; });
  ASSERT_TRUE(RunUntil([&] { return got.has_value(); }));
  EXPECT_FALSE(got->ok);
  EXPECT_EQ(got->error, "reg#tiny:missing: the registry has no such manifest (404)");
  reaper_.Stop();
}

TEST_F(ImagePrefetcherTest, AtMostTwoRunAtOnceAndPastTheBoundARequestIsAnsweredAtOnce) {
  reaper_.Start();
  std::unique_ptr<ImagePrefetcher> images = Make();
  std::ofstream(dir_ + "/hold").close();
  int answered = 0;
  std::vector<std::string> refused;
  for (std::size_t i = 0; i < ImagePrefetcher::kMaxWaiting + 1; ++i) {
    images->Pull(1000, "reg#img:" + std::to_string(i), [&](const ImagePrefetcher::Outcome& o) {
      ++answered;
      if (!o.ok) refused.push_back(o.error);
    });
  }
  ASSERT_EQ(refused.size(), 1U);
  EXPECT_NE(refused[0].find("pulled when its job starts"), std::string::npos) << refused[0];
  ASSERT_TRUE(RunUntil([&] { return Runs() == 2; }));
  EXPECT_EQ(images->Running(), ImagePrefetcher::kMaxPulls);
  // Stop kills what runs; nobody is answered after it.
  images->Stop();
  std::filesystem::remove(dir_ + "/hold");
  const int before = answered;
  loop_.restart();
  loop_.run_for(std::chrono::milliseconds(200));
  EXPECT_EQ(answered, before);
  reaper_.Stop();
}

TEST_F(ImagePrefetcherTest, AnAgentThatMayNotPullSaysWhy) {
  std::unique_ptr<ImagePrefetcher> images = Make(/*may_pull=*/false);
  std::optional<ImagePrefetcher::Outcome> got;
  images->Pull(1000, "reg#tiny:1", [&got](const ImagePrefetcher::Outcome& o) { got = o; });
  ASSERT_TRUE(got.has_value());
  EXPECT_FALSE(got->ok);
  EXPECT_NE(got->error.find("not run as root"), std::string::npos) << got->error;
  EXPECT_EQ(Runs(), 0);
}

}  // namespace
}  // namespace cohort::agent
