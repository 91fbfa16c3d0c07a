// SPDX-License-Identifier: Apache-2.0
#include "cohort/config/account_limits.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <vector>

#include "cohort/diagnostics.h"

namespace cohort::config {
namespace {

using LimitField = std::optional<int> AssocLimits::*;
using TresField = TresCounts AssocLimits::*;

struct CountKey {
  std::string_view name;
  LimitField field;
};
constexpr std::array<CountKey, 3> kCountKeys{{{"GrpJobs", &AssocLimits::grp_jobs},
                                              {"MaxJobs", &AssocLimits::max_jobs},
                                              {"MaxSubmitJobs", &AssocLimits::max_submit_jobs}}};

struct TresKey {
  std::string_view name;
  TresField field;
  bool minutes;  ///< TRES-minutes: no node=
};
constexpr std::array<TresKey, 3> kTresKeys{
    {{"GrpTRES", &AssocLimits::grp_tres, false},
     {"GrpTRESMins", &AssocLimits::grp_tres_mins, true},
     {"MaxTRESPerJob", &AssocLimits::max_tres_per_job, false}}};

// A count in [-1, max]: -1 clears.
std::optional<std::int64_t> ParseCount(std::string_view text, std::int64_t max) {
  std::int64_t value = 0;
  const auto [ptr, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || ptr != text.data() + text.size() || value < -1 ||
      value > max) {
    return std::nullopt;
  }
  return value;
}

absl::Status SetTres(const TresKey& key, std::string_view value, TresCounts& out) {
  TresCounts counts = out;
  const std::string example =
      key.minutes ? "gres/gpu=600000 (GPU-minutes),cpu=1000000" : "gres/gpu=8,cpu=256,node=4";
  if (value.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("{}= is empty; write {}={} (-1 clears one)", key.name, key.name, example));
  }
  for (std::size_t start = 0; start <= value.size();) {
    const std::size_t comma = value.find(',', start);
    const std::size_t end = comma == std::string_view::npos ? value.size() : comma;
    const std::string_view item = value.substr(start, end - start);
    start = end + 1;
    const std::size_t eq = item.find('=');
    const std::string_view name = item.substr(0, eq);
    std::optional<std::int64_t>* slot = nullptr;
    if (EqualsIgnoreCase(name, "cpu")) {
      slot = &counts.cpus;
    } else if (EqualsIgnoreCase(name, "gres/gpu")) {
      slot = &counts.gpus;
    } else if (EqualsIgnoreCase(name, "node") && !key.minutes) {
      slot = &counts.nodes;
    }
    if (slot == nullptr) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: \"{}\" is no TRES Cohort limits; name {} (as {}={})", key.name, item,
          key.minutes ? "cpu or gres/gpu" : "cpu, node or gres/gpu", key.name, example));
    }
    const std::optional<std::int64_t> count = eq == std::string_view::npos
                                                  ? std::nullopt
                                                  : ParseCount(item.substr(eq + 1), kMaxTresCount);
    if (!count) {
      return absl::InvalidArgumentError(
          fmt::format("{}: \"{}\" needs a count from 0 to {} (or -1 to clear), as {}={}", key.name,
                      item, kMaxTresCount, key.name, example));
    }
    if (*count < 0) {
      slot->reset();
    } else {
      *slot = *count;
    }
  }
  out = counts;
  return absl::OkStatus();
}

void AddTres(std::vector<std::string>& words, std::string_view key, const TresCounts& counts) {
  if (!counts.Empty()) words.push_back(fmt::format("{}={}", key, FormatTres(counts)));
}

template <class T>
void Prefer(std::optional<T>& inner, const std::optional<T>& outer) {
  if (!inner) inner = outer;
}

TresCounts Overlay(const TresCounts& inner, const TresCounts& outer) {
  TresCounts out = inner;
  Prefer(out.cpus, outer.cpus);
  Prefer(out.nodes, outer.nodes);
  Prefer(out.gpus, outer.gpus);
  return out;
}

constexpr std::size_t kMaxQosNames = 64;  // in one QOS= list
constexpr std::size_t kMaxQosName = 64;

bool IsQosKey(std::string_view key) {
  return EqualsIgnoreCase(key, "QOS") || EqualsIgnoreCase(key, "QOS+") ||
         EqualsIgnoreCase(key, "QOS-") || EqualsIgnoreCase(key, "DefaultQOS");
}

absl::StatusOr<std::vector<std::string>> QosNames(std::string_view key, std::string_view value) {
  std::vector<std::string> names;
  if (value.empty() || value == "-1" || value == "''") return names;
  for (std::size_t start = 0; start <= value.size();) {
    const std::size_t comma = value.find(',', start);
    const std::size_t end = comma == std::string_view::npos ? value.size() : comma;
    const std::string_view name = value.substr(start, end - start);
    start = end + 1;
    const bool ok = !name.empty() && name.size() <= kMaxQosName &&
                    std::all_of(name.begin(), name.end(), [](unsigned char c) {
                      return std::isalnum(c) || c == '_' || c == '-' || c == '.';
                    });
    if (!ok) {
      return absl::InvalidArgumentError(
          fmt::format("{}=\"{}\": QOS names are 1-{} letters, digits, '_', '-' or '.', "
                      "comma-separated (sacctmgr show qos lists them)",
                      key, value, kMaxQosName));
    }
    if (std::find(names.begin(), names.end(), name) == names.end()) names.emplace_back(name);
    if (names.size() > kMaxQosNames) {
      return absl::InvalidArgumentError(
          fmt::format("{}=: at most {} QOS in one list", key, kMaxQosNames));
    }
  }
  return names;
}

absl::Status SetQos(std::string_view key, std::string_view value, AssocLimits& limits) {
  absl::StatusOr<std::vector<std::string>> names = QosNames(key, value);
  if (!names.ok()) return names.status();
  if (EqualsIgnoreCase(key, "DefaultQOS")) {
    if (names->size() > 1) {
      return absl::InvalidArgumentError(
          fmt::format("DefaultQOS=\"{}\": name one QOS (-1 clears it)", value));
    }
    limits.default_qos = names->empty() ? std::string() : names->front();
    return absl::OkStatus();
  }
  std::vector<std::string> list = limits.qos;
  if (EqualsIgnoreCase(key, "QOS")) {
    list = *std::move(names);
  } else if (EqualsIgnoreCase(key, "QOS+")) {
    for (std::string& name : *names) {
      if (std::find(list.begin(), list.end(), name) == list.end()) list.push_back(std::move(name));
    }
  } else {
    for (const std::string& name : *names) std::erase(list, name);
  }
  if (list.size() > kMaxQosNames) {
    return absl::InvalidArgumentError(
        fmt::format("{}=: at most {} QOS in one list", key, kMaxQosNames));
  }
  limits.qos = std::move(list);
  return absl::OkStatus();
}

}  // namespace

bool IsLimitKey(std::string_view key) {
  if (IsQosKey(key)) return true;
  for (const CountKey& k : kCountKeys) {
    if (EqualsIgnoreCase(key, k.name)) return true;
  }
  for (const TresKey& k : kTresKeys) {
    if (EqualsIgnoreCase(key, k.name)) return true;
  }
  return false;
}

absl::Status SetLimit(std::string_view key, std::string_view value, AssocLimits& limits) {
  if (IsQosKey(key)) return SetQos(key, value, limits);
  for (const CountKey& k : kCountKeys) {
    if (!EqualsIgnoreCase(key, k.name)) continue;
    if (EqualsIgnoreCase(value, "UNLIMITED")) {
      (limits.*k.field).reset();
      return absl::OkStatus();
    }
    const std::optional<std::int64_t> count = ParseCount(value, 1'000'000'000);
    if (!count) {
      return absl::InvalidArgumentError(fmt::format(
          "{}=\"{}\": give a count from 0 to 1000000000, or -1 to clear it", k.name, value));
    }
    if (*count < 0) {
      (limits.*k.field).reset();
    } else {
      limits.*k.field = static_cast<int>(*count);
    }
    return absl::OkStatus();
  }
  for (const TresKey& k : kTresKeys) {
    if (EqualsIgnoreCase(key, k.name)) return SetTres(k, value, limits.*k.field);
  }
  return absl::InvalidArgumentError(
      fmt::format("{} is no limit; limits are GrpTRES, GrpTRESMins, GrpJobs, MaxJobs, "
                  "MaxSubmitJobs, MaxTRESPerJob, QOS and DefaultQOS",
                  key));
}

std::string FormatTres(const TresCounts& counts) {
  std::vector<std::string> items;
  if (counts.cpus) items.push_back(fmt::format("cpu={}", *counts.cpus));
  if (counts.nodes) items.push_back(fmt::format("node={}", *counts.nodes));
  if (counts.gpus) items.push_back(fmt::format("gres/gpu={}", *counts.gpus));
  return fmt::format("{}", fmt::join(items, ","));
}

std::string FormatLimits(const AssocLimits& limits) {
  std::vector<std::string> words;
  AddTres(words, "GrpTRES", limits.grp_tres);
  AddTres(words, "GrpTRESMins", limits.grp_tres_mins);
  if (limits.grp_jobs) words.push_back(fmt::format("GrpJobs={}", *limits.grp_jobs));
  if (limits.max_jobs) words.push_back(fmt::format("MaxJobs={}", *limits.max_jobs));
  if (limits.max_submit_jobs) {
    words.push_back(fmt::format("MaxSubmitJobs={}", *limits.max_submit_jobs));
  }
  AddTres(words, "MaxTRESPerJob", limits.max_tres_per_job);
  if (!limits.qos.empty()) words.push_back(fmt::format("QOS={}", fmt::join(limits.qos, ",")));
  if (!limits.default_qos.empty()) words.push_back("DefaultQOS=" + limits.default_qos);
  return fmt::format("{}", fmt::join(words, " "));
}

AssocLimits Overlay(const AssocLimits& inner, const AssocLimits& outer) {
  AssocLimits out = inner;
  out.grp_tres = Overlay(inner.grp_tres, outer.grp_tres);
  out.grp_tres_mins = Overlay(inner.grp_tres_mins, outer.grp_tres_mins);
  out.max_tres_per_job = Overlay(inner.max_tres_per_job, outer.max_tres_per_job);
  Prefer(out.grp_jobs, outer.grp_jobs);
  Prefer(out.max_jobs, outer.max_jobs);
  Prefer(out.max_submit_jobs, outer.max_submit_jobs);
  if (out.qos.empty()) out.qos = outer.qos;
  if (out.default_qos.empty()) out.default_qos = outer.default_qos;
  return out;
}

namespace {
constexpr std::array<std::pair<std::string_view, UsageResetPeriod>, 6> kPeriods{{
    {"NONE", UsageResetPeriod::kNone},
    {"DAILY", UsageResetPeriod::kDaily},
    {"WEEKLY", UsageResetPeriod::kWeekly},
    {"MONTHLY", UsageResetPeriod::kMonthly},
    {"QUARTERLY", UsageResetPeriod::kQuarterly},
    {"YEARLY", UsageResetPeriod::kYearly},
}};
}  // namespace

std::string_view UsageResetPeriodName(UsageResetPeriod period) {
  for (const auto& [name, value] : kPeriods) {
    if (value == period) return name;
  }
  return "NONE";
}

std::optional<UsageResetPeriod> ParseUsageResetPeriod(std::string_view name) {
  for (const auto& [known, value] : kPeriods) {
    if (EqualsIgnoreCase(name, known)) return value;
  }
  return std::nullopt;
}

std::chrono::milliseconds PeriodStart(UsageResetPeriod period, std::chrono::milliseconds now) {
  using namespace std::chrono;
  const sys_days day = floor<days>(sys_time<milliseconds>(now));
  const year_month_day date(day);
  sys_days start;
  switch (period) {
    case UsageResetPeriod::kNone:
      return milliseconds(0);
    case UsageResetPeriod::kDaily:
      start = day;
      break;
    case UsageResetPeriod::kWeekly:
      start = day - (weekday(day) - Monday);
      break;
    case UsageResetPeriod::kMonthly:
      start = sys_days(date.year() / date.month() / 1);
      break;
    case UsageResetPeriod::kQuarterly: {
      const unsigned first = (static_cast<unsigned>(date.month()) - 1) / 3 * 3 + 1;
      start = sys_days(date.year() / month(first) / 1);
      break;
    }
    case UsageResetPeriod::kYearly:
      start = sys_days(date.year() / January / 1);
      break;
  }
  return duration_cast<milliseconds>(start.time_since_epoch());
}

std::chrono::milliseconds NextPeriodStart(UsageResetPeriod period, std::chrono::milliseconds now) {
  using namespace std::chrono;
  const milliseconds start = PeriodStart(period, now);
  const sys_days day = floor<days>(sys_time<milliseconds>(start));
  const year_month_day date(day);
  sys_days next;
  switch (period) {
    case UsageResetPeriod::kNone:
      return milliseconds(0);
    case UsageResetPeriod::kDaily:
      next = day + days(1);
      break;
    case UsageResetPeriod::kWeekly:
      next = day + days(7);
      break;
    case UsageResetPeriod::kMonthly:
      next = sys_days(date + months(1));
      break;
    case UsageResetPeriod::kQuarterly:
      next = sys_days(date + months(3));
      break;
    case UsageResetPeriod::kYearly:
      next = sys_days(date + years(1));
      break;
  }
  return duration_cast<milliseconds>(next.time_since_epoch());
}

}  // namespace cohort::config
