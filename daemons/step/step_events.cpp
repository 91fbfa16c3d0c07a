// SPDX-License-Identifier: Apache-2.0
#include "step_events.h"

#include <fmt/format.h>
#include <signal.h>

#include <sys/wait.h>

#include <algorithm>
#include <charconv>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"

namespace cohort::step {
namespace {

// Splits off the first space-separated word of `text`.
std::string_view NextWord(std::string_view& text) {
  const std::size_t space = text.find(' ');
  const std::string_view word = text.substr(0, space);
  text = space == std::string_view::npos ? std::string_view() : text.substr(space + 1);
  return word;
}

template <typename Number>
bool ParseNumber(std::string_view& text, Number& number) {
  const std::string_view word = NextWord(text);
  if (word.empty()) return false;
  const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), number);
  return error == std::errc() && end == word.data() + word.size();
}

absl::Status Malformed(std::string_view line) {
  return absl::InvalidArgumentError(fmt::format("malformed event line {:?}", line));
}

}  // namespace

std::string FormatStepEvent(const StepEvent& event) {
  return std::visit(
      [](const auto& e) -> std::string {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, StepdEvent>) {
          return fmt::format("stepd {} {}\n", e.pid, e.start_time);
        } else if constexpr (std::is_same_v<T, RankStartedEvent>) {
          return fmt::format("started {} {}\n", e.rank, e.pid);
        } else if constexpr (std::is_same_v<T, GroupEvent>) {
          return fmt::format("pgid {}\n", e.pgid);
        } else if constexpr (std::is_same_v<T, RankExitEvent>) {
          return fmt::format("exit {} {} {} {} {}\n", e.rank, e.exit_code, e.signal, e.max_rss_kb,
                             e.cpu_ms);
        } else if constexpr (std::is_same_v<T, FailedEvent>) {
          std::string reason = e.reason;
          std::replace(reason.begin(), reason.end(), '\n', ' ');
          return fmt::format("failed {}\n", reason);
        } else if constexpr (std::is_same_v<T, ImageEvent>) {
          return fmt::format("image {} {} {}\n", ImageOutcomeName(e.outcome), e.bytes, e.ms);
        } else {
          static_assert(std::is_same_v<T, DoneEvent>);
          return "done\n";
        }
      },
      event);
}

RankExitEvent ExitOf(int rank, int wait_status, const struct rusage& usage) {
  const auto ms = [](const timeval& t) {
    return static_cast<std::int64_t>(t.tv_sec) * 1000 + t.tv_usec / 1000;
  };
  return RankExitEvent{.rank = rank,
                       .exit_code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 0,
                       .signal = WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0,
                       .max_rss_kb = usage.ru_maxrss,
                       .cpu_ms = ms(usage.ru_utime) + ms(usage.ru_stime)};
}

absl::StatusOr<StepEvent> ParseStepEvent(std::string_view line) {
  std::string_view rest = line;
  const std::string_view word = NextWord(rest);
  if (word == "failed") return FailedEvent{std::string(rest)};
  StepEvent event;
  bool ok = false;
  if (word == "stepd") {
    StepdEvent e;
    ok = ParseNumber(rest, e.pid) && ParseNumber(rest, e.start_time) && e.pid > 0;
    event = e;
  } else if (word == "started") {
    RankStartedEvent e;
    ok = ParseNumber(rest, e.rank) && ParseNumber(rest, e.pid) && e.rank >= 0 && e.pid > 0;
    event = e;
  } else if (word == "pgid") {
    GroupEvent e;
    ok = ParseNumber(rest, e.pgid) && e.pgid > 0;
    event = e;
  } else if (word == "exit") {
    RankExitEvent e;
    ok = ParseNumber(rest, e.rank) && ParseNumber(rest, e.exit_code) &&
         ParseNumber(rest, e.signal) && e.rank >= 0 && e.signal >= 0;
    if (ok && !rest.empty()) {
      ok = ParseNumber(rest, e.max_rss_kb) && ParseNumber(rest, e.cpu_ms) && e.max_rss_kb >= 0 &&
           e.cpu_ms >= 0;
    }
    event = e;
  } else if (word == "done") {
    event = DoneEvent{};
    ok = true;
  } else if (word == "image") {
    ImageEvent e;
    const std::string_view outcome = NextWord(rest);
    ok = true;
    if (outcome == "pulled") {
      e.outcome = ImageOutcome::kPulled;
    } else if (outcome == "cached") {
      e.outcome = ImageOutcome::kCached;
    } else if (outcome == "failed") {
      e.outcome = ImageOutcome::kFailed;
    } else {
      ok = false;
    }
    ok = ok && ParseNumber(rest, e.bytes) && ParseNumber(rest, e.ms) && e.bytes >= 0 && e.ms >= 0;
    event = e;
  }
  if (!ok || !rest.empty()) return Malformed(line);
  return event;
}

std::string_view ImageOutcomeName(ImageOutcome outcome) {
  switch (outcome) {
    case ImageOutcome::kPulled:
      return "pulled";
    case ImageOutcome::kCached:
      return "cached";
    case ImageOutcome::kFailed:
      return "failed";
  }
  return "failed";
}

CompleteLines SplitCompleteLines(std::string_view text) {
  CompleteLines result;
  std::size_t start = 0;
  while (true) {
    const std::size_t newline = text.find('\n', start);
    if (newline == std::string_view::npos) break;
    result.lines.push_back(text.substr(start, newline - start));
    start = newline + 1;
  }
  result.consumed = start;
  return result;
}

std::optional<LaunchReport> LaunchRecord::Apply(const StepEvent& event) {
  if (done_) return std::nullopt;
  return std::visit(
      [this](const auto& e) -> std::optional<LaunchReport> {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, StepdEvent>) {
          stepd_ = e;
          return std::nullopt;
        } else if constexpr (std::is_same_v<T, RankStartedEvent>) {
          started_.emplace(e.rank, e.pid);
          return std::nullopt;
        } else if constexpr (std::is_same_v<T, GroupEvent>) {
          if (failed_ || running_) return std::nullopt;
          pgid_ = e.pgid;
          running_ = true;
          return RanksStartedReport{started_, pgid_};
        } else if constexpr (std::is_same_v<T, RankExitEvent>) {
          if (!started_.contains(e.rank) || !exits_.emplace(e.rank, e).second) return std::nullopt;
          max_rss_kb_ = std::max(max_rss_kb_, e.max_rss_kb);
          cpu_ms_ += e.cpu_ms;
          if (e.exit_code == 0 && e.signal == 0) {
            ++ranks_ok_;
          } else if (running_ && !first_failure_) {
            first_failure_ = e;
          }
          if (!running_) return std::nullopt;
          return RankExitedReport{e.rank, e.exit_code, e.signal, e.max_rss_kb, e.cpu_ms};
        } else if constexpr (std::is_same_v<T, FailedEvent>) {
          if (failed_ || running_) return std::nullopt;
          failed_ = true;
          launch_error_ = e.reason;
          return LaunchFailedReport{e.reason};
        } else if constexpr (std::is_same_v<T, ImageEvent>) {
          return ImageReport{e};
        } else {
          static_assert(std::is_same_v<T, DoneEvent>);
          done_ = true;
          return ReleasedReport{};
        }
      },
      event);
}

std::vector<StepEvent> LaunchRecord::AbandonEvents(std::string_view reason) const {
  std::vector<StepEvent> events;
  if (done_) return events;
  if (!running_ && !failed_) events.emplace_back(FailedEvent{std::string(reason)});
  for (const auto& [rank, pid] : LiveRanks()) events.emplace_back(RankExitEvent{rank, 0, SIGKILL});
  events.emplace_back(DoneEvent{});
  return events;
}

pid_t LaunchRecord::ProcessGroup() const {
  if (pgid_ > 0) return pgid_;
  return started_.empty() ? 0 : started_.begin()->second;
}

std::map<int, pid_t> LaunchRecord::LiveRanks() const {
  std::map<int, pid_t> live;
  if (done_) return live;
  for (const auto& [rank, pid] : started_) {
    if (!exits_.contains(rank)) live.emplace(rank, pid);
  }
  return live;
}

}  // namespace cohort::step
