// SPDX-License-Identifier: Apache-2.0
#include "image_prefetcher.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string_view>

#include "agent_log.h"
#include "step_launcher.h"

namespace cohort::agent {
namespace {

ImagePrefetcher::Outcome Failed(std::string why) {
  ImagePrefetcher::Outcome outcome;
  outcome.error = std::move(why);
  return outcome;
}

}  // namespace

ImagePrefetcher::ImagePrefetcher(boost::asio::io_context& loop, ChildReaper& reaper,
                                 step::ImageStore store, std::string program, std::string folder,
                                 bool may_pull)
    : loop_(loop),
      reaper_(reaper),
      store_(std::move(store)),
      program_(std::move(program)),
      folder_(std::move(folder)),
      may_pull_(may_pull) {}

ImagePrefetcher::~ImagePrefetcher() { Stop(); }

void ImagePrefetcher::Stop() {
  *alive_ = false;
  for (auto& [pid, run] : running_) {
    run.deadline->cancel();
    ::kill(pid, SIGKILL);
  }
  running_.clear();
  queue_.clear();
  waiting_.clear();
}

void ImagePrefetcher::Pull(std::uint32_t owner, const std::string& image, Done done) {
  if (!may_pull_) {
    done(
        Failed("the node's agent does not run as root, so it runs no containers; the image "
               "cannot be pulled ahead"));
    return;
  }
  Key key{owner, image};
  if (const auto it = waiting_.find(key); it != waiting_.end()) {
    it->second.push_back(std::move(done));  // the same pull answers both
    return;
  }
  if (waiting_.size() >= kMaxWaiting) {
    done(
        Failed(fmt::format("{} images are being pulled ahead on this node already; this one is "
                           "pulled when its job starts",
                           waiting_.size())));
    return;
  }
  waiting_[key].push_back(std::move(done));
  queue_.push_back(std::move(key));
  StartNext();
}

void ImagePrefetcher::StartNext() {
  while (running_.size() < kMaxPulls && !queue_.empty()) {
    Key key = std::move(queue_.front());
    queue_.pop_front();
    const std::vector<std::string> argv =
        step::ImagePullCommand(program_, store_, key.second, key.first);
    const std::string output = fmt::format("{}/image-ahead-{}.out", folder_, ++serial_);
    absl::StatusOr<pid_t> pid =
        SpawnAlone(argv.front(), std::vector<std::string>(argv.begin() + 1, argv.end()), {}, output,
                   OpenMode::kTruncate);
    if (!pid.ok()) {
      Finish(key, Failed(std::string(pid.status().message())));
      continue;
    }
    LaunchLog().info("image_ahead_started image={:?} owner={} pid={}", key.second, key.first, *pid);
    Run run{.key = key,
            .output = output,
            .deadline = std::make_unique<boost::asio::steady_timer>(loop_),
            .started = std::chrono::steady_clock::now()};
    run.deadline->expires_after(kPullTimeout);
    run.deadline->async_wait(
        [this, alive = alive_, pid = *pid](const boost::system::error_code& e) {
          if (e || !*alive) return;
          if (const auto found = running_.find(pid); found != running_.end()) {
            found->second.timed_out = true;
            ::kill(pid, SIGKILL);
          }
        });
    running_.emplace(*pid, std::move(run));
    reaper_.Watch(*pid, [this, alive = alive_, pid = *pid](int wait_status) {
      if (!*alive) return;
      const auto found = running_.find(pid);
      if (found == running_.end()) return;
      Run done = std::move(found->second);
      running_.erase(found);
      done.deadline->cancel();
      std::string text;
      {
        std::ifstream in(done.output);
        std::ostringstream read;
        read << in.rdbuf();
        text = read.str();
      }
      ::unlink(done.output.c_str());
      Outcome outcome;
      outcome.ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - done.started)
                       .count();
      // cohort-image's last line is its description, or why it failed
      // (stdout and stderr share the file).
      if (done.timed_out) {
        outcome.error = fmt::format("the pull took over {} minutes and was stopped",
                                    std::chrono::minutes(kPullTimeout).count());
      } else if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
        outcome.error = step::ImagePullComplaint(text, done.key.second, wait_status);
      } else if (absl::StatusOr<step::ImageInfo> info = step::ParseImageInfo(step::LastLine(text));
                 !info.ok()) {
        outcome.error = std::string(info.status().message());
      } else {
        outcome.ok = true;
        outcome.digest = info->digest;
        outcome.bytes = info->bytes;
        outcome.cached = info->cached;
      }
      Finish(done.key, outcome);
      StartNext();
    });
  }
}

void ImagePrefetcher::Finish(const Key& key, const Outcome& outcome) {
  if (outcome.ok) {
    LaunchLog().info("image_ahead_done image={:?} owner={} digest={} cached={} ms={}", key.second,
                     key.first, outcome.digest, outcome.cached, outcome.ms);
  } else {
    LaunchLog().warn("image_ahead_failed image={:?} owner={} reason={:?}", key.second, key.first,
                     outcome.error);
  }
  const auto it = waiting_.find(key);
  if (it == waiting_.end()) return;
  std::vector<Done> waiters = std::move(it->second);
  waiting_.erase(it);
  for (const Done& done : waiters) done(outcome);
}

}  // namespace cohort::agent
