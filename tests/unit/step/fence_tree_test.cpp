// SPDX-License-Identifier: Apache-2.0
#include "fence_tree.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace cohort::step {
namespace {

constexpr char kKey[] = "00112233445566778899aabbccddeeff";

// A step's stepds in one process: one tree per node on 127.0.0.1, each
// fence's end as each node saw it.
class Step {
 public:
  Step(int nodes, int width, std::chrono::seconds timeout = std::chrono::seconds(30)) {
    std::vector<std::string> names;
    for (int n = 0; n < nodes; ++n) names.push_back("node" + std::to_string(n));
    for (int n = 0; n < nodes; ++n) {
      absl::StatusOr<std::unique_ptr<FenceTree>> tree = FenceTree::Listen(
          "127.0.0.1", {.key = kKey,
                        .nodes = names,
                        .tasks = std::vector<int>(static_cast<std::size_t>(nodes), 2),
                        .node_index = n,
                        .width = width,
                        .timeout = timeout,
                        .done =
                            [this, n](int fence, absl::StatusOr<std::string> parts) {
                              const std::lock_guard lock(mutex_);
                              ended_[{n, fence}] = std::move(parts);
                              changed_.notify_all();
                            },
                        // "silent" is never answered; anything else at
                        // once, or from another thread for "later".
                        .answer =
                            [this, n](int from, std::string request, FenceTree::Reply reply) {
                              const std::string_view asked = request;
                              if (asked == "silent") return;
                              const std::string answer =
                                  fmt::format("node{} answers {}: {}", n, from, request);
                              if (asked != "later") {
                                reply(answer);
                                return;
                              }
                              const std::lock_guard lock(mutex_);
                              repliers_.emplace_back([reply, answer] { reply(answer); });
                            }});
      EXPECT_TRUE(tree.ok()) << tree.status();
      trees_.push_back(*std::move(tree));
    }
  }

  void Join() {
    std::vector<std::string> addresses;
    for (const auto& tree : trees_) addresses.push_back(tree->Address());
    for (const auto& tree : trees_) tree->Join(addresses);
  }

  FenceTree& operator[](int n) { return *trees_[static_cast<std::size_t>(n)]; }

  // Node n's question to node `to`, and the answer (or "error: why"),
  // waiting up to 20 s.
  std::string AskText(int n, int to, const std::string& request) {
    const absl::StatusOr<std::string> answer = Ask(n, to, request);
    return answer.ok() ? *answer : "error: " + std::string(answer.status().message());
  }
  absl::StatusOr<std::string> Ask(int n, int to, const std::string& request) {
    std::optional<absl::StatusOr<std::string>> got;
    (*this)[n].Ask(to, request, [this, &got](absl::StatusOr<std::string> answer) {
      const std::lock_guard lock(mutex_);
      got = std::move(answer);
      changed_.notify_all();
    });
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, std::chrono::seconds(20), [&] { return got.has_value(); })) {
      return absl::DeadlineExceededError("the test waited 20 s");
    }
    return *got;
  }
  void Drop(int n) { trees_[static_cast<std::size_t>(n)].reset(); }

  // Node n's end of fence `fence`, waiting up to `limit` for it.
  std::optional<absl::StatusOr<std::string>> Ended(
      int n, int fence, std::chrono::seconds limit = std::chrono::seconds(20)) {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, limit, [&] { return ended_.contains({n, fence}); })) {
      return std::nullopt;
    }
    return ended_.at({n, fence});
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::pair<int, int>, absl::StatusOr<std::string>> ended_;
  std::vector<std::unique_ptr<FenceTree>> trees_;
  std::vector<std::jthread> repliers_;  // joined before the trees go
};

TEST(FenceTreeTest, EveryNodeGetsEveryPartInNodeOrderThroughSeveralLevels) {
  // Width 2 over 11 nodes: four levels, so parts pass through nodes that
  // forward their children's with their own.
  Step step(11, 2);
  step.Join();
  for (int fence = 0; fence < 2; ++fence) {
    for (int n = 10; n >= 0; --n) {
      step[n].Contribute(fence, "[" + std::to_string(n) + ":" + std::to_string(fence) + "]");
    }
    std::string want;
    for (int n = 0; n < 11; ++n)
      want += "[" + std::to_string(n) + ":" + std::to_string(fence) + "]";
    for (int n = 0; n < 11; ++n) {
      const auto ended = step.Ended(n, fence);
      ASSERT_TRUE(ended.has_value()) << "node " << n << " fence " << fence;
      ASSERT_TRUE(ended->ok()) << ended->status();
      EXPECT_EQ(**ended, want) << "node " << n;
    }
  }
}

TEST(FenceTreeTest, AFenceEndsBelowEvenWhenTheRootGoesAsSoonAsItsOwnEnded) {
  // The root's ranks finish first and its stepd leaves at once: the nodes
  // below still get the fence's end.
  Step step(9, 2);
  step.Join();
  for (int n = 0; n < 9; ++n) step[n].Contribute(0, std::to_string(n));
  ASSERT_TRUE(step.Ended(0, 0).has_value());
  step.Drop(0);
  for (int n = 1; n < 9; ++n) {
    const auto ended = step.Ended(n, 0);
    ASSERT_TRUE(ended.has_value()) << "node " << n;
    EXPECT_TRUE(ended->ok()) << "node " << n << ": " << ended->status();
  }
}

TEST(FenceTreeTest, PartsGivenBeforeTheAddressesWaitForThem) {
  Step step(3, 2);
  for (int n = 0; n < 3; ++n) step[n].Contribute(0, std::string(1, static_cast<char>('a' + n)));
  EXPECT_FALSE(step.Ended(0, 0, std::chrono::seconds(1)).has_value());
  step.Join();
  for (int n = 0; n < 3; ++n) {
    const auto ended = step.Ended(n, 0);
    ASSERT_TRUE(ended.has_value() && ended->ok());
    EXPECT_EQ(**ended, "abc");
  }
}

TEST(FenceTreeTest, OneNodeEndsItsFenceAlone) {
  Step step(1, 8);
  step.Join();
  step[0].Contribute(0, "only");
  const auto ended = step.Ended(0, 0);
  ASSERT_TRUE(ended.has_value() && ended->ok());
  EXPECT_EQ(**ended, "only");
}

TEST(FenceTreeTest, AFenceANodeNeverJoinsFailsEverywhereNamingIt) {
  // 7 nodes, width 2: node 4 is a leaf under node 1.
  Step step(7, 2, std::chrono::seconds(1));
  step.Join();
  for (int n = 0; n < 7; ++n) {
    if (n != 4) step[n].Contribute(0, "x");
  }
  for (int n = 0; n < 7; ++n) {
    const auto ended = step.Ended(n, 0);
    ASSERT_TRUE(ended.has_value()) << "node " << n << " was left waiting";
    ASSERT_FALSE(ended->ok());
    EXPECT_EQ(ended->status().message(),
              "PMIx fence 0 timed out after 1 s (SLURM_PMIX_TIMEOUT): node4 (ranks 8-9) never "
              "arrived")
        << "node " << n;
  }
  // Its part, late, ends the same way at once.
  step[4].Contribute(0, "x");
  EXPECT_FALSE(step.Ended(4, 0)->ok());
}

TEST(FenceTreeTest, ALostStepdFailsTheFencesOfTheOthers) {
  Step step(3, 2);
  step.Join();
  step[1].Contribute(0, "a");
  // Node 2's stepd goes before it joins the fence: the link breaks.
  ASSERT_FALSE(step.Ended(0, 0, std::chrono::seconds(1)).has_value());
  step.Drop(2);
  step[0].Contribute(0, "b");
  for (int n = 0; n < 2; ++n) {
    const auto ended = step.Ended(n, 0);
    ASSERT_TRUE(ended.has_value()) << "node " << n << " was left waiting";
    ASSERT_FALSE(ended->ok());
    EXPECT_NE(ended->status().message().find("lost its link to node2's cohort-stepd"),
              std::string::npos)
        << ended->status();
  }
}

TEST(FenceTreeTest, AParentThatCannotBeReachedFailsTheFenceSayingWhere) {
  Step step(2, 2);
  std::vector<std::string> addresses = {"127.0.0.1:1", step[1].Address()};
  step[1].Join(addresses);
  step[1].Contribute(0, "a");
  const auto ended = step.Ended(1, 0);
  ASSERT_TRUE(ended.has_value());
  ASSERT_FALSE(ended->ok());
  EXPECT_NE(ended->status().message().find("cannot reach node0's cohort-stepd at 127.0.0.1:1"),
            std::string::npos)
      << ended->status();
}

TEST(FenceTreeTest, AQuestionReachesItsNodeAndTheAnswerComesBack) {
  Step step(5, 2);
  step.Join();
  // A leaf asks a node of another branch, twice on the same link, then
  // the root; an answer may come later from another thread.
  EXPECT_EQ(step.AskText(4, 2, "rank 9"), "node2 answers 4: rank 9");
  EXPECT_EQ(step.AskText(4, 2, "rank 10"), "node2 answers 4: rank 10");
  EXPECT_EQ(step.AskText(4, 0, "later"), "node0 answers 4: later");
  // Fences go on beside the questions.
  for (int n = 0; n < 5; ++n) step[n].Contribute(0, std::to_string(n));
  const auto ended = step.Ended(3, 0);
  ASSERT_TRUE(ended.has_value() && ended->ok());
  EXPECT_EQ(**ended, "01234");
}

TEST(FenceTreeTest, AQuestionAskedBeforeTheAddressesWaitsForThem) {
  Step step(3, 2);
  std::optional<absl::StatusOr<std::string>> got;
  std::mutex mutex;
  step[1].Ask(2, "early", [&](absl::StatusOr<std::string> answer) {
    const std::lock_guard lock(mutex);
    got = std::move(answer);
  });
  step.Join();
  for (int i = 0; i < 400; ++i) {
    {
      const std::lock_guard lock(mutex);
      if (got) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const std::lock_guard lock(mutex);
  ASSERT_TRUE(got.has_value() && got->ok());
  EXPECT_EQ(**got, "node2 answers 1: early");
}

TEST(FenceTreeTest, AQuestionWithoutAnAnswerFailsSayingWhy) {
  Step step(3, 2, std::chrono::seconds(1));
  step.Join();
  const absl::StatusOr<std::string> silent = step.Ask(1, 2, "silent");
  EXPECT_EQ(silent.status().message(),
            "node2's cohort-stepd did not answer within 1 s (SLURM_PMIX_TIMEOUT)");
  EXPECT_TRUE(absl::IsInvalidArgument(step.Ask(1, 1, "myself").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(step.Ask(1, 7, "nobody").status()));
  // A node whose stepd has gone cannot be reached.
  step.Drop(2);
  const absl::StatusOr<std::string> gone = step.Ask(0, 2, "anyone?");
  EXPECT_NE(gone.status().message().find("node2's cohort-stepd"), std::string::npos)
      << gone.status();
}

TEST(FenceTreeTest, StrangersHoldingConnectionsOpenDoNotShutTheStepOut) {
  Step step(2, 2);
  // More connections than node 0 keeps, none of which says a word.
  const std::string address = step[0].Address();
  const std::size_t colon = address.rfind(':');
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1))));
  ASSERT_EQ(::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr), 1);
  std::vector<int> strangers;
  for (int i = 0; i < 100; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to), 0);
    strangers.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  step.Join();
  for (int n = 0; n < 2; ++n) step[n].Contribute(0, std::to_string(n));
  for (int n = 0; n < 2; ++n) {
    const auto ended = step.Ended(n, 0);
    ASSERT_TRUE(ended.has_value()) << "node " << n;
    ASSERT_TRUE(ended->ok()) << ended->status();
    EXPECT_EQ(**ended, "01");
  }
  for (const int fd : strangers) ::close(fd);
}

TEST(FenceTreeTest, PartsOfASubtreeAreParsedWithBounds) {
  const std::map<int, std::string> parts = {{3, "abc"}, {7, ""}, {8, "x\ny"}};
  const std::string text = FenceTree::EncodeParts(parts);
  const auto any = [](int) { return true; };
  absl::StatusOr<std::map<int, std::string>> back = FenceTree::ParseParts(text, any);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, parts);
  // Not the sender's subtree, twice, lengths past the data, no header.
  EXPECT_FALSE(FenceTree::ParseParts(text, [](int n) { return n != 7; }).ok());
  EXPECT_FALSE(FenceTree::ParseParts("1 1\na1 1\nb", any).ok());
  EXPECT_FALSE(FenceTree::ParseParts("1 99\nabc", any).ok());
  EXPECT_FALSE(FenceTree::ParseParts("1 -1\nabc", any).ok());
  EXPECT_FALSE(FenceTree::ParseParts("abc", any).ok());
  EXPECT_FALSE(FenceTree::ParseParts("1\n", any).ok());
}

TEST(FenceTreeTest, OptionsThatAreNoStepAreRefused) {
  // Options of `nodes` (one rank each) for node `index`.
  const auto options = [](std::vector<std::string> nodes, int index) {
    return FenceTree::Options{.key = kKey,
                              .nodes = nodes,
                              .tasks = std::vector<int>(nodes.size(), 1),
                              .node_index = index,
                              .width = 8,
                              .timeout = std::chrono::seconds(1),
                              .done = [](int, absl::StatusOr<std::string>) {},
                              .answer = nullptr};
  };
  EXPECT_FALSE(FenceTree::Listen("127.0.0.1", options({}, 0)).ok());
  EXPECT_FALSE(FenceTree::Listen("127.0.0.1", options({"a"}, 1)).ok());
  EXPECT_FALSE(FenceTree::Listen("not-an-address", options({"a"}, 0)).ok());
  EXPECT_TRUE(FenceTree::Listen("127.0.0.1", options({"a"}, 0)).ok());
}

}  // namespace
}  // namespace cohort::step
