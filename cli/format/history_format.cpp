// SPDX-License-Identifier: Apache-2.0
#include "format/history_format.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <chrono>
#include <ctime>
#include <optional>

#include <fmt/format.h>

#include "cohort/diagnostics.h"
#include "cohort/text/slurm_time.h"
#include "format/job_format.h"

namespace cohort::cli {
namespace {

constexpr std::string_view kTimeForms =
    "write YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS] (local time), today, now, or "
    "now-N[seconds|minutes|hours|days|weeks] (such as now-2hours)";

constexpr std::string_view kHistoryStateList =
    "COMPLETED (CD), FAILED (F), CANCELLED (CA), TIMEOUT (TO), NODE_FAIL (NF)";

struct TimeUnit {
  std::string_view word;
  std::int64_t seconds;
};
constexpr std::array<TimeUnit, 20> kTimeUnits = {{
    {"s", 1},       {"sec", 1},      {"secs", 1},    {"second", 1},    {"seconds", 1},
    {"min", 60},    {"mins", 60},    {"minute", 60}, {"minutes", 60},  {"h", 3600},
    {"hr", 3600},   {"hrs", 3600},   {"hour", 3600}, {"hours", 3600},  {"d", 86400},
    {"day", 86400}, {"days", 86400}, {"w", 604800},  {"week", 604800}, {"weeks", 604800},
}};

// Local wall-clock time to epoch milliseconds; nullopt when the C library
// cannot represent it.
std::optional<std::int64_t> LocalToEpochMs(std::tm local) {
  local.tm_isdst = -1;  // let the zone decide whether DST applies on that day
  const std::time_t seconds = std::mktime(&local);
  if (seconds == static_cast<std::time_t>(-1)) return std::nullopt;
  return static_cast<std::int64_t>(seconds) * 1000;
}

// Reads min..max decimal digits at `pos`, advancing it.
bool ReadDigits(std::string_view text, std::size_t& pos, std::size_t min, std::size_t max,
                int& value) {
  std::size_t end = pos;
  while (end < text.size() && end - pos < max &&
         std::isdigit(static_cast<unsigned char>(text[end])) != 0) {
    ++end;
  }
  if (end - pos < min) return false;
  std::from_chars(text.data() + pos, text.data() + end, value);
  pos = end;
  return true;
}

bool ReadChar(std::string_view text, std::size_t& pos, char c) {
  if (pos >= text.size() || text[pos] != c) return false;
  ++pos;
  return true;
}

// `now`, `now-N[UNIT]` or `now+N[UNIT]`; nullopt when `text` is not of
// that shape.
std::optional<std::int64_t> ParseNow(std::string_view text, std::int64_t now_ms) {
  if (text.size() < 3 || !EqualsIgnoreCase(text.substr(0, 3), "now")) return std::nullopt;
  const std::string_view rest = text.substr(3);
  if (rest.empty()) return now_ms;
  if (rest[0] != '-' && rest[0] != '+') return std::nullopt;
  std::size_t pos = 1;
  std::size_t end = pos;
  while (end < rest.size() && std::isdigit(static_cast<unsigned char>(rest[end])) != 0) ++end;
  // Ten digits of weeks still fit an int64 of milliseconds.
  if (end == pos || end - pos > 10) return std::nullopt;
  std::int64_t count = 0;
  std::from_chars(rest.data() + pos, rest.data() + end, count);
  const std::string_view unit = rest.substr(end);
  std::int64_t unit_seconds = unit.empty() ? 1 : 0;
  for (const TimeUnit& u : kTimeUnits) {
    if (EqualsIgnoreCase(unit, u.word)) unit_seconds = u.seconds;
  }
  if (unit_seconds == 0) return std::nullopt;
  const std::int64_t delta_ms = count * unit_seconds * 1000;
  return rest[0] == '-' ? now_ms - delta_ms : now_ms + delta_ms;
}

}  // namespace

absl::StatusOr<std::int64_t> ParseHistoryTime(std::string_view text, std::string_view option,
                                              std::int64_t now_ms) {
  auto unreadable = [&] {
    return absl::InvalidArgumentError(
        fmt::format("{}: cannot read \"{}\" as a time; {}", option, text, kTimeForms));
  };
  auto checked = [&](std::optional<std::int64_t> ms) -> absl::StatusOr<std::int64_t> {
    if (!ms) return unreadable();
    if (*ms <= 0) {
      return absl::InvalidArgumentError(
          fmt::format("{}: {} is before 1970; give a later time", option, text));
    }
    return *ms;
  };

  if (std::optional<std::int64_t> ms = ParseNow(text, now_ms)) return checked(ms);
  if (EqualsIgnoreCase(text, "today") || EqualsIgnoreCase(text, "midnight")) {
    const std::time_t now_s = static_cast<std::time_t>(now_ms / 1000);
    std::tm local{};
    if (::localtime_r(&now_s, &local) == nullptr) return unreadable();
    local.tm_hour = 0;
    local.tm_min = 0;
    local.tm_sec = 0;
    return checked(LocalToEpochMs(local));
  }

  // YYYY-MM-DD[THH:MM[:SS]]
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  std::size_t pos = 0;
  if (!ReadDigits(text, pos, 4, 4, year) || !ReadChar(text, pos, '-') ||
      !ReadDigits(text, pos, 1, 2, month) || !ReadChar(text, pos, '-') ||
      !ReadDigits(text, pos, 1, 2, day)) {
    return unreadable();
  }
  if (ReadChar(text, pos, 'T')) {
    if (!ReadDigits(text, pos, 1, 2, hour) || !ReadChar(text, pos, ':') ||
        !ReadDigits(text, pos, 2, 2, minute)) {
      return unreadable();
    }
    if (ReadChar(text, pos, ':') && !ReadDigits(text, pos, 2, 2, second)) return unreadable();
  }
  if (pos != text.size()) return unreadable();
  const std::chrono::year_month_day date{std::chrono::year(year),
                                         std::chrono::month(static_cast<unsigned>(month)),
                                         std::chrono::day(static_cast<unsigned>(day))};
  if (!date.ok() || hour > 23 || minute > 59 || second > 59) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {}: no such date or time of day; {}", option, text, kTimeForms));
  }
  if (year < 1970) return checked(0);
  std::tm local{};
  local.tm_year = year - 1900;
  local.tm_mon = month - 1;
  local.tm_mday = day;
  local.tm_hour = hour;
  local.tm_min = minute;
  local.tm_sec = second;
  return checked(LocalToEpochMs(local));
}

namespace {

constexpr std::string_view kFutureForms =
    "write HH:MM[:SS] (the next such time of day), YYYY-MM-DD[THH:MM[:SS]] (local time), "
    "now+N[seconds|minutes|hours|days|weeks] (such as now+1hour), today, tomorrow, midnight, "
    "noon, elevenses, fika or teatime, and a time of day with -today or -tomorrow "
    "(noon-tomorrow)";

// When the local clock reads hour:minute:second `days` days from the day
// of `now_ms` (0: today's, past or not).
std::optional<std::int64_t> ClockOn(std::int64_t now_ms, int hour, int minute, int second,
                                    int days) {
  const std::time_t now_s = static_cast<std::time_t>(now_ms / 1000);
  std::tm local{};
  if (::localtime_r(&now_s, &local) == nullptr) return std::nullopt;
  local.tm_hour = hour;
  local.tm_min = minute;
  local.tm_sec = second;
  local.tm_mday += days;
  return LocalToEpochMs(local);
}

// The next time the local clock reads hour:minute:second, from `now_ms`
// (today's, else tomorrow's); `days` more days on.
std::optional<std::int64_t> NextClock(std::int64_t now_ms, int hour, int minute, int second,
                                      int days) {
  const std::optional<std::int64_t> at = ClockOn(now_ms, hour, minute, second, days);
  if (at && days == 0 && *at <= now_ms) return ClockOn(now_ms, hour, minute, second, 1);
  return at;
}

}  // namespace

absl::StatusOr<std::int64_t> ParseFutureTime(std::string_view text, std::string_view option,
                                             std::int64_t now_ms) {
  struct Word {
    std::string_view word;
    int hour;
    int days;  // 0: the next such time; 1: tomorrow's
  };
  constexpr Word kWords[] = {{"midnight", 0, 0}, {"noon", 12, 0},    {"elevenses", 11, 0},
                             {"fika", 15, 0},    {"teatime", 16, 0}, {"tomorrow", 0, 1}};
  std::optional<std::int64_t> at;
  if (EqualsIgnoreCase(text, "today") || EqualsIgnoreCase(text, "now")) return now_ms;
  // As Slurm: a time of day, then the day it falls on (noon-tomorrow,
  // 16:00-today); alone, the next such time.
  std::string_view clock = text;
  std::optional<int> on_day;  // days from today
  for (const auto& [suffix, days] : {std::pair{"-today", 0}, std::pair{"-tomorrow", 1}}) {
    const std::string_view s(suffix);
    if (text.size() > s.size() && EqualsIgnoreCase(text.substr(text.size() - s.size()), s)) {
      clock = text.substr(0, text.size() - s.size());
      on_day = days;
    }
  }
  // That day's, as given (today's may be past: it starts at once), else the next.
  const auto at_clock = [&](int h, int m, int sec) {
    return on_day ? ClockOn(now_ms, h, m, sec, *on_day) : NextClock(now_ms, h, m, sec, 0);
  };
  for (const Word& w : kWords) {
    if (!EqualsIgnoreCase(clock, w.word)) continue;
    if (w.days > 0 && on_day) break;  // tomorrow-tomorrow
    at = w.days > 0 ? NextClock(now_ms, w.hour, 0, 0, w.days) : at_clock(w.hour, 0, 0);
  }
  int hour = 0, minute = 0, second = 0;
  std::size_t pos = 0;
  if (!at && ReadDigits(clock, pos, 1, 2, hour) && ReadChar(clock, pos, ':') &&
      ReadDigits(clock, pos, 2, 2, minute) &&
      (pos == clock.size() ||
       (ReadChar(clock, pos, ':') && ReadDigits(clock, pos, 2, 2, second))) &&
      pos == clock.size()) {
    if (hour > 23 || minute > 59 || second > 59) {
      return absl::InvalidArgumentError(
          fmt::format("{}: {}: no such time of day; {}", option, text, kFutureForms));
    }
    at = at_clock(hour, minute, second);
  }
  if (at) return *at;
  // now+N and dates as the history's times; their error with these forms.
  if (text.starts_with("now-")) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {} is in the past; {}", option, text, kFutureForms));
  }
  absl::StatusOr<std::int64_t> parsed = ParseHistoryTime(text, option, now_ms);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: cannot read \"{}\" as a time; {}", option, text, kFutureForms));
  }
  return parsed;
}

absl::StatusOr<std::vector<v1::JobState>> ParseHistoryStates(std::string_view text) {
  std::vector<v1::JobState> states;
  for (const std::string_view word : CommaList(text)) {
    const std::optional<v1::JobState> state = ParseJobState(word);
    if (!state) {
      return absl::InvalidArgumentError(
          fmt::format("--state: no state \"{}\"; states: {}", word, kHistoryStateList));
    }
    if (!IsFinished(*state)) {
      return absl::InvalidArgumentError(fmt::format(
          "--state: {} jobs are not in the history, which holds finished jobs (see cohort "
          "queue for those); states: {}",
          JobStateName(*state), kHistoryStateList));
    }
    if (std::find(states.begin(), states.end(), *state) == states.end()) states.push_back(*state);
  }
  if (states.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("--state: no state given; states: {}", kHistoryStateList));
  }
  return states;
}

absl::StatusOr<std::vector<std::int64_t>> ParseJobIds(std::string_view text) {
  std::vector<std::int64_t> ids;
  for (const std::string_view word : CommaList(text)) {
    std::int64_t id = 0;
    const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), id);
    if (error != std::errc() || end != word.data() + word.size() || id <= 0) {
      return absl::InvalidArgumentError(fmt::format(
          "--jobs: \"{}\" is not a job id; write positive ids, comma separated, such as 12,15",
          word));
    }
    ids.push_back(id);
  }
  if (ids.empty()) {
    return absl::InvalidArgumentError("--jobs: no job id given; write ID[,ID...], such as 12,15");
  }
  return ids;
}

absl::StatusOr<v1::JobHistoryRequest> MakeHistoryRequest(const HistoryFilters& filters,
                                                         std::int64_t now_ms) {
  v1::JobHistoryRequest request;
  if (filters.user.find(',') != std::string::npos) {
    return absl::InvalidArgumentError(
        fmt::format("--user: one login name, not a list (\"{}\"); run cohort history once per "
                    "user, or -a for everyone's jobs",
                    filters.user));
  }
  request.set_user_name(filters.user);
  request.set_all_users(filters.all_users);
  request.set_account(filters.account);
  if (!filters.states.empty()) {
    absl::StatusOr<std::vector<v1::JobState>> states = ParseHistoryStates(filters.states);
    if (!states.ok()) return states.status();
    for (const v1::JobState s : *states) request.add_states(s);
  }
  if (!filters.jobs.empty()) {
    absl::StatusOr<std::vector<std::int64_t>> ids = ParseJobIds(filters.jobs);
    if (!ids.ok()) return ids.status();
    for (const std::int64_t id : *ids) request.add_job_ids(id);
  }
  if (!filters.since.empty()) {
    absl::StatusOr<std::int64_t> since = ParseHistoryTime(filters.since, "--since", now_ms);
    if (!since.ok()) return since.status();
    request.set_since_ms(*since);
  }
  if (!filters.until.empty()) {
    absl::StatusOr<std::int64_t> until = ParseHistoryTime(filters.until, "--until", now_ms);
    if (!until.ok()) return until.status();
    request.set_until_ms(*until);
  }
  if (request.since_ms() > 0 && request.until_ms() > 0 &&
      request.since_ms() >= request.until_ms()) {
    return absl::InvalidArgumentError(
        fmt::format("--since {} is not before --until {}; no job can have ended between them",
                    filters.since, filters.until));
  }
  if (filters.limit < 0) {
    return absl::InvalidArgumentError(fmt::format(
        "--limit: {} is negative; give a count of jobs, or 0 for no limit", filters.limit));
  }
  request.set_limit(filters.limit);
  return request;
}

std::vector<std::string> HistoryHeader() {
  return {"JOBID", "NAME", "USER",    "ACCOUNT", "PARTITION", "NODES",     "NODELIST", "SUBMIT",
          "START", "END",  "ELAPSED", "STATE",   "EXITCODE",  "GPU_HOURS", "MAXRSS",   "TOTALCPU"};
}

std::vector<std::string> HistoryRow(const v1::Job& job) {
  const v1::JobSpec& spec = job.spec();
  // A finished job's elapsed time ends at its end: no clock needed.
  const std::int64_t elapsed = TimeUsedSeconds(job, job.end_time_ms());
  return {std::to_string(job.id()),
          spec.name(),
          JobUser(job),
          spec.account(),
          spec.partition(),
          std::to_string(spec.nodes()),
          job.nodes().empty() ? std::string("None assigned") : job.nodes(),
          FormatTimestamp(job.submit_time_ms()),
          FormatTimestamp(job.start_time_ms()),
          FormatTimestamp(job.end_time_ms()),
          FormatSlurmTime(std::chrono::seconds(elapsed)),
          std::string(JobStateName(job.state())),
          FormatExitCode(job),
          fmt::format("{:.2f}", job.gpu_hours()),
          FormatMaxRss(job.max_rss_kb()),
          job.total_cpu_ms() > 0 ? FormatCpuTime(job.total_cpu_ms()) : ""};
}

std::vector<std::string> HistoryStepRow(const v1::Job& job, const v1::JobStep& step) {
  return {StepDisplayId(job, step),
          step.step_id() < 0 ? std::string("batch") : job.spec().name(),
          "",
          job.spec().account(),
          "",
          std::to_string(StepNodeCount(step)),
          step.nodes(),
          "",
          FormatTimestamp(step.start_time_ms()),
          FormatTimestamp(step.end_time_ms()),
          FormatSlurmTime(std::chrono::seconds(StepElapsedSeconds(step, step.end_time_ms()))),
          step.state(),
          fmt::format("{}:{}", step.exit_code(), step.exit_signal()),
          "",
          FormatMaxRss(step.max_rss_kb()),
          FormatCpuTime(step.total_cpu_ms())};
}

}  // namespace cohort::cli
