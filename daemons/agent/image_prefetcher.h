// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "child_reaper.h"
#include "image_pull.h"

/// Images pulled ahead of a job's start (docs/containers.md): the
/// controller sends PrepareImage to the nodes it plans a pending job on,
/// and the node's agent runs `cohort-image pull` into the node's cache, as
/// the job's stepds would at its start, which then find it there.
namespace cohort::agent {

/// Runs the agent's pulls ahead, for every node it speaks for (they share
/// one cache). One `cohort-image` per image and owner at a time (a second
/// request waits for the first's answer), at most kMaxPulls at once, the
/// rest queued; past kMaxWaiting requests, or on an agent that is not root,
/// a request is answered at once with why not. Lives on, and is used only
/// from, the agent's loop thread; the reaper must outlive it.
class ImagePrefetcher {
 public:
  static constexpr std::size_t kMaxPulls = 2;
  static constexpr std::size_t kMaxWaiting = 64;
  /// A pull that takes longer is killed (and tried again at the start).
  static constexpr std::chrono::hours kPullTimeout{1};

  /// What came of one pull.
  struct Outcome {
    bool ok = false;
    std::string error;       ///< not ok: cohort-image's words
    std::string digest;      ///< ok
    std::int64_t bytes = 0;  ///< ok: the image's disk space
    bool cached = false;     ///< ok: it was in the cache already
    std::int64_t ms = 0;     ///< how long it took
  };
  using Done = std::function<void(const Outcome&)>;

  /// `program` is cohort-image; its output goes to files in `folder`.
  /// `may_pull` is false where containers cannot run (the agent is not
  /// root): every request is answered with that.
  ImagePrefetcher(boost::asio::io_context& loop, ChildReaper& reaper, step::ImageStore store,
                  std::string program, std::string folder, bool may_pull);
  ~ImagePrefetcher();
  ImagePrefetcher(const ImagePrefetcher&) = delete;
  ImagePrefetcher& operator=(const ImagePrefetcher&) = delete;

  /// Pulls `image` for `owner` (whose registry logins are used); `done` is
  /// called once, on the loop, possibly before this returns.
  void Pull(std::uint32_t owner, const std::string& image, Done done);
  /// Kills the pulls that run; no Done is called after this.
  void Stop();

  [[nodiscard]] std::size_t Running() const { return running_.size(); }

 private:
  using Key = std::pair<std::uint32_t, std::string>;  ///< owner, image
  struct Run {
    Key key;
    std::string output;
    std::unique_ptr<boost::asio::steady_timer> deadline;
    std::chrono::steady_clock::time_point started;
    bool timed_out = false;
  };
  void StartNext();
  void Finish(const Key& key, const Outcome& outcome);

  boost::asio::io_context& loop_;
  ChildReaper& reaper_;
  const step::ImageStore store_;
  const std::string program_;
  const std::string folder_;
  const bool may_pull_;
  std::map<Key, std::vector<Done>> waiting_;  ///< queued or running, with who waits
  std::deque<Key> queue_;                     ///< not started yet, in order
  std::map<pid_t, Run> running_;
  std::uint64_t serial_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace cohort::agent
