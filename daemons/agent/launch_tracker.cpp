// SPDX-License-Identifier: Apache-2.0
#include "launch_tracker.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <utility>

#include "agent_log.h"
#include "proc_stat.h"

namespace cohort::agent {
namespace {

// The mark is a fixed-width number written with one pwrite: a kill between
// two writes can never leave half of it.
constexpr int kMarkWidth = 20;

std::string EventsPath(const std::string& folder) { return folder + "/events"; }
std::string MarkPath(const std::string& folder) { return folder + "/reported"; }

// The bytes of `path` from `offset` to its end; empty when it does not exist.
std::string ReadFrom(const std::string& path, std::uint64_t offset, int& error) {
  error = 0;
  std::string text;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) error = errno;
    return text;
  }
  std::array<char, 65536> buffer{};
  auto position = static_cast<off_t>(offset);
  while (true) {
    const ssize_t n = ::pread(fd, buffer.data(), buffer.size(), position);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) error = errno;
    if (n <= 0) break;
    text.append(buffer.data(), static_cast<std::size_t>(n));
    position += n;
  }
  ::close(fd);
  return text;
}

}  // namespace

LaunchTracker::LaunchTracker(std::string folder, step::LaunchId id)
    : folder_(std::move(folder)), id_(id) {}

void LaunchTracker::LoadReportedMark() {
  int error = 0;
  const std::string text = ReadFrom(MarkPath(folder_), 0, error);
  std::uint64_t mark = 0;
  const char* end = text.data() + text.size();
  while (end > text.data() && (end[-1] == '\n' || end[-1] == ' ')) --end;
  const auto [ptr, parse_error] = std::from_chars(text.data(), end, mark);
  // No mark (or a torn one): report everything again; the controller
  // applies each report once.
  reported_ = parse_error == std::errc() && ptr == end ? mark : 0;
}

void LaunchTracker::SaveReportedMark() const {
  const std::string path = MarkPath(folder_);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  const std::string text = fmt::format("{:0{}}\n", reported_, kMarkWidth);
  if (fd < 0 || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    LaunchLog().warn("launch_mark_not_saved job={} attempt={} path={} error={:?}", id_.job_id,
                     id_.attempt, path, std::strerror(errno));
  }
  if (fd >= 0) ::close(fd);
}

std::vector<step::LaunchReport> LaunchTracker::ReadEvents() {
  std::vector<step::LaunchReport> reports;
  int error = 0;
  const std::string text = ReadFrom(EventsPath(folder_), offset_, error);
  if (error != 0) {
    LaunchLog().warn("launch_events_unreadable job={} attempt={} folder={} error={:?}", id_.job_id,
                     id_.attempt, folder_, std::strerror(error));
  }
  const step::CompleteLines complete = step::SplitCompleteLines(text);
  std::uint64_t position = offset_;
  for (const std::string_view line : complete.lines) {
    position += line.size() + 1;
    absl::StatusOr<step::StepEvent> event = step::ParseStepEvent(line);
    if (!event.ok()) {
      LaunchLog().warn("launch_event_ignored job={} attempt={} folder={} error={:?}", id_.job_id,
                       id_.attempt, folder_, std::string(event.status().message()));
      continue;
    }
    std::optional<step::LaunchReport> report = record_.Apply(*event);
    if (report && position > reported_) reports.push_back(*std::move(report));
  }
  offset_ += complete.consumed;
  if (offset_ > reported_) {
    reported_ = offset_;
    SaveReportedMark();
  }
  return reports;
}

StepdState LaunchTracker::CheckStepd() const {
  if (!record_.HasStepd()) return StepdState::kUnknown;
  return step::ProcessAlive(record_.StepdPid(), record_.StepdStartTime()) ? StepdState::kAlive
                                                                          : StepdState::kGone;
}

std::vector<step::LaunchReport> LaunchTracker::Abandon(std::string_view reason) {
  if (record_.Done()) return {};
  if (!record_.LiveRanks().empty() && record_.ProcessGroup() > 0) {
    // Nobody is left to reap them or report their exit: end them.
    ::killpg(record_.ProcessGroup(), SIGKILL);
  }
  // What is in the file already must be applied first: it may hold `done`.
  std::vector<step::LaunchReport> reports = ReadEvents();
  if (record_.Done()) return reports;
  const std::vector<step::StepEvent> events = record_.AbandonEvents(reason);
  std::string lines;
  for (const step::StepEvent& event : events) lines += step::FormatStepEvent(event);
  const std::string path = EventsPath(folder_);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  std::string_view rest = lines;
  int error = fd < 0 ? errno : 0;
  while (error == 0 && !rest.empty()) {
    const ssize_t written = ::write(fd, rest.data(), rest.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      error = errno;
      break;
    }
    rest.remove_prefix(static_cast<std::size_t>(written));
  }
  if (fd >= 0) ::close(fd);
  if (error == 0) {
    for (step::LaunchReport& report : ReadEvents()) reports.push_back(std::move(report));
    return reports;
  }
  // The launch must end even so; a later agent will find it unfinished and
  // abandon it again.
  LaunchLog().error("launch_events_not_written job={} attempt={} path={} error={:?}", id_.job_id,
                    id_.attempt, path, std::strerror(error));
  for (const step::StepEvent& event : events) {
    if (std::optional<step::LaunchReport> report = record_.Apply(event)) {
      reports.push_back(*std::move(report));
    }
  }
  return reports;
}

std::chrono::system_clock::time_point LaunchTracker::LastChange() const {
  struct stat info {};
  if (::stat(EventsPath(folder_).c_str(), &info) != 0) return std::chrono::system_clock::now();
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(info.st_mtim.tv_sec) +
          std::chrono::nanoseconds(info.st_mtim.tv_nsec)));
}

}  // namespace cohort::agent
