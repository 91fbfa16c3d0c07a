// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

/// A step's fences across its nodes (`srun --mpi=pmix` or `pmi2`), carried
/// by a tree of the step's cohort-stepds, as Slurm's PMIx plugin carries
/// them between its slurmstepds: node i's parent is node (i - 1) / width,
/// so a fence over N nodes takes twice the tree's depth (about log_width N)
/// in hops and no stepd hears from more than `width` others. Each link is
/// TCP inside TLS keyed by the step's key, as the step's I/O stream is
/// (psk_link.h): a child dials its parent, whose address every stepd learns
/// once, as the step starts, from the step's `cohort run` (Join).
///
/// Up the tree each node sends its own part with its subtree's once all of
/// them are there; the root, once it has every node's, sends them all down,
/// and each node hands them, in node order, to `done`. A fence some node's
/// ranks never join fails after `timeout` (plus two seconds for each level
/// below the node, so that the node nearest the missing one says so first),
/// naming the nodes whose parts never came; a link that breaks fails every
/// fence under way and every later one, so no rank waits for good.
///
/// Beside the fences, a stepd may ask another a question (Ask: a PMIx
/// direct-modex get of a rank's data), on a link of the same kind that it
/// dials to that node once and keeps; the other's `answer` replies.
namespace cohort::step {

inline constexpr int kFenceTreeWidth = 8;

class FenceTree {
 public:
  /// A fence ended on this node: its number, and every node's part in node
  /// order (concatenated), or why it failed. On the tree's thread.
  using Done = std::function<void(int fence, absl::StatusOr<std::string> parts)>;
  /// An answer to Ask, or why none came.
  using Reply = std::function<void(absl::StatusOr<std::string>)>;
  /// Serves a request another node's stepd asked (`from`: its index):
  /// `reply` may be called later, from any thread, once.
  using Answer = std::function<void(int from, std::string request, Reply reply)>;

  struct Options {
    std::string key;                    ///< the step's key (hex)
    std::vector<std::string> nodes;     ///< the step's nodes, in its order
    std::vector<int> tasks;             ///< the step's ranks on each, in block order
    int node_index = 0;                 ///< this node among them
    int width = kFenceTreeWidth;        ///< children of each node, at most
    std::chrono::seconds timeout{300};  ///< for a fence, and for an answer
    Done done;
    Answer answer;  ///< none: other nodes' requests are refused
  };

  /// Listens on `host` (an address of this node the others reach; the
  /// system picks the port) and starts the tree's thread. The errno's
  /// status when it cannot listen; InvalidArgument for options that do not
  /// describe a step.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<FenceTree>> Listen(const std::string& host,
                                                                         Options options);
  ~FenceTree();
  FenceTree(const FenceTree&) = delete;
  FenceTree& operator=(const FenceTree&) = delete;

  /// Where the node's children dial it: "HOST:PORT".
  [[nodiscard]] const std::string& Address() const { return address_; }

  /// Every node's Address, in node order: the node dials its parent. An
  /// error (the exchange through `cohort run` failed) fails every fence.
  /// Any thread; once.
  void Join(absl::StatusOr<std::vector<std::string>> addresses);

  /// This node's part of fence `fence` (numbered from 0 in the order the
  /// ranks call fences, the same on every node). Any thread.
  void Contribute(int fence, std::string part);

  /// Asks node `node`'s stepd `request` (its Options::answer serves it);
  /// `done` gets the answer, on the tree's thread, or why none came: the
  /// node cannot be reached, its link broke, or `timeout` passed. Any
  /// thread; requests made before Join wait for it.
  void Ask(int node, std::string request, Reply done);

  /// The parts of a subtree as they travel up: "INDEX LENGTH\n" then the
  /// part, for each node. ParseParts refuses what a stepd of the step
  /// would not send: a malformed header, a length past the data, a node
  /// outside `allowed` or twice.
  [[nodiscard]] static std::string EncodeParts(const std::map<int, std::string>& parts);
  [[nodiscard]] static absl::StatusOr<std::map<int, std::string>> ParseParts(
      std::string_view text, const std::function<bool(int)>& allowed);

 private:
  struct Link;
  struct Pending;
  struct Asked {
    int node = 0;
    Reply done;
    std::chrono::steady_clock::time_point began;
  };
  explicit FenceTree(Options options);
  void Serve();
  void Take();
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Link>> Dial(int node);
  void SendAsk(int node, std::string request, Reply done);
  void HeardAsk(Link& link, int kind, int number, std::string data);
  void Accept();
  void Step(Link& link);
  void Send(Link& link, std::string_view bytes);
  void Heard(Link& link, int kind, int fence, std::string data);
  void Advance(int fence);
  void Fail(int fence, const absl::Status& why);
  void Finish(int fence, const absl::StatusOr<std::string>& parts);
  void Broke(const std::string& why);
  void Expire();
  [[nodiscard]] bool InSubtree(int root, int node) const;
  [[nodiscard]] int SubtreeSize(int root) const;
  [[nodiscard]] std::string Missing(const Pending& pending) const;
  [[nodiscard]] int Height() const;

  Options options_;
  std::vector<int> children_;  ///< node indexes
  std::string address_;
  int listener_ = -1;
  int wake_[2] = {-1, -1};
  std::thread thread_;

  std::mutex mutex_;  ///< what other threads hand the tree's thread
  std::vector<std::pair<int, std::string>> contributed_;
  std::optional<absl::StatusOr<std::vector<std::string>>> addresses_;
  std::vector<std::tuple<int, std::string, Reply>> asking_;
  bool stop_ = false;
  /// Answers this node's `answer` gave (by link serial and request number),
  /// for the thread to send; shared with the replies, which may outlive
  /// the tree (a server answering late) and then drop theirs.
  struct Replies;
  std::shared_ptr<Replies> replies_;

  // The tree's thread's own.
  std::unique_ptr<Link> parent_;
  std::vector<std::unique_ptr<Link>> links_;  ///< children, and those yet to say which
  std::map<int, Pending> fences_;
  std::map<int, absl::Status> failed_;  ///< fences that failed here, for parts that come late
  absl::Status broken_;                 ///< a link broke: every later fence fails so
  std::vector<std::string> known_;      ///< every node's address, once joined
  std::vector<std::tuple<int, std::string, Reply>> unsent_;  ///< asked before Join
  std::map<int, std::unique_ptr<Link>> peers_;               ///< links dialled to ask, by node
  std::map<int, Asked> asked_;                               ///< by request number
  int next_ask_ = 0;
  std::uint64_t next_serial_ = 0;
};

}  // namespace cohort::step
