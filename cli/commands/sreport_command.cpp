// SPDX-License-Identifier: Apache-2.0
// sreport: what the cluster, its accounts and its users used over a window,
// in CPU-minutes and GPU-hours, summed from the jobs as sacct shows them
// (AllocCPUS × Elapsed; GPUs held × Elapsed), cut to the window.
#include <pwd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cohort/diagnostics.h"
#include "cohort/fmt_absl.h"
#include "cohort/text/slurm_time.h"
#include "commands/commands.h"
#include "commands/slurm_commands.h"
#include "format/history_format.h"
#include "format/job_format.h"
#include "format/print_fields.h"
#include "format/sacct_fields.h"
#include "transport/controller_client.h"

namespace cohort::cli {
// Its own namespace: unity builds compile this file with other commands'.
namespace sreport_cli {
namespace {

struct SreportOptions {
  ConnectionOptions connection;
  FieldsStyle style;                  // -n, -p, -P
  std::string time_unit = "minutes";  // -t: minutes, hours, seconds, percent
  std::string tres = "cpu";           // -T: cpu, gres/gpu (a comma list)
  std::vector<std::string> words;
};

/// What a job used in the window, in TRES-seconds.
struct Use {
  double cpu = 0;
  double gpu = 0;
  Use& operator+=(const Use& o) {
    cpu += o.cpu;
    gpu += o.gpu;
    return *this;
  }
  [[nodiscard]] double Of(std::string_view tres) const { return tres == "cpu" ? cpu : gpu; }
};

struct Window {
  std::int64_t start_ms = 0;
  std::int64_t end_ms = 0;
};

// A job's use within the window: AllocCPUS and the GPUs it held, times the
// seconds of its run inside the window (its whole Elapsed when it lies
// inside, as sacct's ElapsedRaw).
Use UseIn(const v1::Job& job, const Window& w, std::int64_t now_ms) {
  if (job.start_time_ms() <= 0) return {};
  const std::int64_t end = job.end_time_ms() > 0 ? job.end_time_ms() : now_ms;
  const std::int64_t elapsed = TimeUsedSeconds(job, now_ms);
  double seconds = static_cast<double>(elapsed);
  if (job.start_time_ms() < w.start_ms || end > w.end_ms) {
    const std::int64_t from = std::max(job.start_time_ms(), w.start_ms);
    const std::int64_t to = std::min(end, w.end_ms);
    seconds = to > from ? static_cast<double>((to - from) / 1000) : 0;
  }
  const std::int64_t ran_ms = end - job.start_time_ms();
  const double gpus =
      ran_ms > 0 ? std::round(job.gpu_hours() * 3.6e6 / static_cast<double>(ran_ms)) : 0;
  return {.cpu = AllocCpus(job) * seconds, .gpu = gpus * seconds};
}

// Slurm's start= and end=: a time as sacct's --starttime takes it.
absl::StatusOr<std::int64_t> ParseWhen(std::string_view key, const std::string& value) {
  return ParseHistoryTime(value, key, NowMs());
}

struct Report {
  std::string kind;  // utilization, topusage, accountutilizationbyuser
  Window window;
  std::vector<std::string> users;
  std::vector<std::string> accounts;
  int top = 10;
};

absl::StatusOr<Report> Parse(const std::vector<std::string>& words) {
  if (words.size() < 2) {
    return absl::InvalidArgumentError(
        "say which report: sreport cluster utilization | cluster accountutilizationbyuser | "
        "user topusage");
  }
  Report r;
  if (EqualsIgnoreCase(words[0], "cluster") && EqualsIgnoreCase(words[1], "utilization")) {
    r.kind = "utilization";
  } else if (EqualsIgnoreCase(words[0], "cluster") &&
             (EqualsIgnoreCase(words[1], "accountutilizationbyuser") ||
              EqualsIgnoreCase(words[1], "AccountUtilizationByUser"))) {
    r.kind = "accountutilizationbyuser";
  } else if (EqualsIgnoreCase(words[0], "user") && EqualsIgnoreCase(words[1], "topusage")) {
    r.kind = "topusage";
  } else {
    return absl::InvalidArgumentError(
        fmt::format("\"{} {}\": the reports here are cluster utilization, cluster "
                    "accountutilizationbyuser and user topusage",
                    words[0], words[1]));
  }
  // Slurm's default: yesterday, midnight to midnight (local time).
  const std::int64_t today = ParseHistoryTime("today", "start", NowMs()).value_or(NowMs());
  r.window = {today - 24 * 3600 * 1000, today};
  for (std::size_t i = 2; i < words.size(); ++i) {
    const std::string& word = words[i];
    const std::size_t eq = word.find('=');
    if (eq == std::string::npos) {
      if (EqualsIgnoreCase(word, "group") || EqualsIgnoreCase(word, "tree")) continue;
      return absl::InvalidArgumentError(
          fmt::format("\"{}\": reports take Start=, End=, Users=, Accounts= and TopCount=", word));
    }
    const std::string key = word.substr(0, eq);
    const std::string value = word.substr(eq + 1);
    if (EqualsIgnoreCase(key, "start")) {
      absl::StatusOr<std::int64_t> at = ParseWhen(key, value);
      if (!at.ok()) return at.status();
      r.window.start_ms = *at;
    } else if (EqualsIgnoreCase(key, "end")) {
      absl::StatusOr<std::int64_t> at = ParseWhen(key, value);
      if (!at.ok()) return at.status();
      r.window.end_ms = *at;
    } else if (EqualsIgnoreCase(key, "users") || EqualsIgnoreCase(key, "user")) {
      r.users = CommaStrings(value);
    } else if (EqualsIgnoreCase(key, "accounts") || EqualsIgnoreCase(key, "account")) {
      r.accounts = CommaStrings(value);
    } else if (EqualsIgnoreCase(key, "topcount")) {
      int n = 0;
      const auto [ptr, error] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (value.empty() || error != std::errc() || ptr != value.data() + value.size() || n < 1 ||
          n > 100000) {
        return absl::InvalidArgumentError(
            fmt::format("TopCount={}: give a count from 1 to 100000", value));
      }
      r.top = n;
    } else if (EqualsIgnoreCase(key, "cluster") || EqualsIgnoreCase(key, "clusters")) {
      continue;
    } else {
      return absl::InvalidArgumentError(
          fmt::format("{}: reports take Start=, End=, Users=, Accounts= and TopCount=", key));
    }
  }
  if (r.window.end_ms <= r.window.start_ms) {
    return absl::InvalidArgumentError("End= must come after Start=");
  }
  return r;
}

std::string ProperName(const std::string& login) {
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (getpwnam_r(login.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 ||
      found == nullptr || found->pw_gecos == nullptr) {
    return login;
  }
  std::string gecos = found->pw_gecos;
  gecos = gecos.substr(0, gecos.find(','));
  return gecos.empty() ? login : gecos;
}

std::string Amount(const SreportOptions& o, double tres_seconds, double whole) {
  if (EqualsIgnoreCase(o.time_unit, "percent")) {
    return whole > 0 ? fmt::format("{:.2f}%", 100.0 * tres_seconds / whole) : "0.00%";
  }
  if (EqualsIgnoreCase(o.time_unit, "hours")) return fmt::format("{:.0f}", tres_seconds / 3600);
  if (EqualsIgnoreCase(o.time_unit, "seconds")) return fmt::format("{:.0f}", tres_seconds);
  return fmt::format("{:.0f}", tres_seconds / 60);
}

std::string UnitWords(const SreportOptions& o, std::string_view tres) {
  const std::string_view what = tres == "cpu" ? "CPU" : "TRES gres/gpu";
  if (EqualsIgnoreCase(o.time_unit, "percent")) return fmt::format("{} Percentage of Total", what);
  if (EqualsIgnoreCase(o.time_unit, "hours")) return fmt::format("{} Hours", what);
  if (EqualsIgnoreCase(o.time_unit, "seconds")) return fmt::format("{} Seconds", what);
  return fmt::format("{} Minutes", what);
}

void Title(const SreportOptions& o, const std::string& what, const Window& w,
           std::string_view tres) {
  if (o.style.no_header || o.style.Parsable()) return;
  const std::string rule(80, '-');
  std::cout << rule << '\n'
            << fmt::format("{} {} - {}\n", what, FormatTimestamp(w.start_ms),
                           FormatTimestamp(w.end_ms - 1000))
            << fmt::format("Usage reported in {}\n", UnitWords(o, tres)) << rule << '\n';
}

absl::Status Run(ControllerClient& client, const SreportOptions& o, const Report& r) {
  std::vector<std::string> tres_list;
  for (const std::string& t : CommaStrings(o.tres)) {
    if (EqualsIgnoreCase(t, "cpu")) {
      tres_list.emplace_back("cpu");
    } else if (EqualsIgnoreCase(t, "gres/gpu") || EqualsIgnoreCase(t, "gpu")) {
      tres_list.emplace_back("gres/gpu");
    } else {
      return absl::InvalidArgumentError(
          fmt::format("-T {}: the TRES reported are cpu and gres/gpu", t));
    }
  }
  if (!EqualsIgnoreCase(o.time_unit, "minutes") && !EqualsIgnoreCase(o.time_unit, "hours") &&
      !EqualsIgnoreCase(o.time_unit, "seconds") && !EqualsIgnoreCase(o.time_unit, "percent")) {
    return absl::InvalidArgumentError(
        fmt::format("-t {}: give minutes, hours, seconds or percent", o.time_unit));
  }
  const std::int64_t now = NowMs();
  // Finished jobs that ended in or after the window, and those running.
  v1::JobHistoryRequest history;
  history.set_all_users(true);
  history.set_since_ms(r.window.start_ms);
  absl::StatusOr<v1::JobHistoryResponse> ended = client.JobHistory(history);
  if (!ended.ok()) return ended.status();
  v1::ListJobsRequest list;
  list.set_all_users(true);
  list.add_states(v1::JOB_RUNNING);
  list.add_states(v1::JOB_COMPLETING);
  absl::StatusOr<v1::ListJobsResponse> running = client.ListJobs(list);
  if (!running.ok()) return running.status();
  std::map<std::string, Use> by_user;
  std::map<std::pair<std::string, std::string>, Use> by_account_user;
  Use total;
  for (const auto* jobs : {&ended->jobs(), &running->jobs()}) {
    for (const v1::Job& job : *jobs) {
      const Use use = UseIn(job, r.window, now);
      if (use.cpu == 0 && use.gpu == 0) continue;
      total += use;
      by_user[job.spec().user_name()] += use;
      by_account_user[{job.spec().account(), job.spec().user_name()}] += use;
    }
  }
  absl::StatusOr<v1::ListNodesResponse> nodes = client.ListNodes(v1::ListNodesRequest{});
  if (!nodes.ok()) return nodes.status();
  Use capacity;
  const double window_s = static_cast<double>(r.window.end_ms - r.window.start_ms) / 1000.0;
  for (const v1::Node& node : nodes->nodes()) {
    capacity.cpu += node.cpus() * window_s;
    capacity.gpu += node.gpus() * window_s;
  }
  for (const std::string& tres : tres_list) {
    const double whole = capacity.Of(tres);
    std::vector<FieldColumn> columns;
    std::vector<std::vector<std::string>> rows;
    if (r.kind == "utilization") {
      Title(o, "Cluster Utilization", r.window, tres);
      columns = {
          {"Cluster", 9}, {"TRES Name", 14}, {"Allocated", 13}, {"Idle", 13}, {"Reported", 13}};
      const double used = total.Of(tres);
      rows.push_back({"cluster", tres, Amount(o, used, whole),
                      Amount(o, std::max(0.0, whole - used), whole), Amount(o, whole, whole)});
    } else if (r.kind == "topusage") {
      Title(o, fmt::format("Top {} Users", r.top), r.window, tres);
      std::vector<std::pair<double, std::pair<std::string, std::string>>> ranked;
      for (const auto& [key, use] : by_account_user) {
        if (!r.users.empty() &&
            std::find(r.users.begin(), r.users.end(), key.second) == r.users.end())
          continue;
        if (!r.accounts.empty() &&
            std::find(r.accounts.begin(), r.accounts.end(), key.first) == r.accounts.end())
          continue;
        ranked.push_back({use.Of(tres), key});
      }
      std::sort(ranked.begin(), ranked.end(),
                [](const auto& a, const auto& b) { return a.first > b.first; });
      columns = {{"Cluster", 9},  {"Login", 9},      {"Proper Name", 15},
                 {"Account", 15}, {"TRES Name", 14}, {"Used", 10}};
      for (std::size_t i = 0; i < ranked.size() && i < static_cast<std::size_t>(r.top); ++i) {
        const auto& [used, key] = ranked[i];
        rows.push_back({"cluster", key.second, ProperName(key.second), key.first, tres,
                        Amount(o, used, whole)});
      }
    } else {
      Title(o, "Cluster/Account/User Utilization", r.window, tres);
      absl::StatusOr<v1::ListAccountsResponse> tree =
          client.ListAccounts(v1::ListAccountsRequest{});
      if (!tree.ok()) return tree.status();
      // Each account's use, with that of the accounts under it.
      std::map<std::string, std::string> parent;
      for (const v1::Association& line : tree->associations()) {
        if (line.user().empty()) parent[line.account()] = line.parent();
      }
      std::map<std::string, double> subtree;
      for (const auto& [key, use] : by_account_user) {
        std::set<std::string> seen;
        for (std::string at = key.first; !at.empty() && seen.insert(at).second;
             at = parent.contains(at) ? parent[at] : std::string()) {
          subtree[at] += use.Of(tres);
        }
      }
      columns = {{"Cluster", 9},      {"Account", 20},   {"Login", 9},
                 {"Proper Name", 15}, {"TRES Name", 14}, {"Used", 10}};
      rows.push_back({"cluster", "root", "", "", tres, Amount(o, total.Of(tres), whole)});
      // Accounts of the tree depth first, then those jobs charged without one.
      std::vector<std::pair<std::string, int>> order;
      std::set<std::string> listed;
      for (const v1::Association& line : tree->associations()) {
        if (line.user().empty()) {
          order.emplace_back(line.account(), line.depth() + 1);
          listed.insert(line.account());
        }
      }
      for (const auto& [key, use] : by_account_user) {
        if (listed.insert(key.first).second) order.emplace_back(key.first, 1);
      }
      for (const auto& [account, depth] : order) {
        if (!r.accounts.empty() &&
            std::find(r.accounts.begin(), r.accounts.end(), account) == r.accounts.end())
          continue;
        const std::string indent(static_cast<std::size_t>(depth), ' ');
        rows.push_back(
            {"cluster", indent + account, "", "", tres, Amount(o, subtree[account], whole)});
        for (const auto& [key, use] : by_account_user) {
          if (key.first != account) continue;
          if (!r.users.empty() &&
              std::find(r.users.begin(), r.users.end(), key.second) == r.users.end())
            continue;
          rows.push_back({"cluster", indent + account, key.second, ProperName(key.second), tres,
                          Amount(o, use.Of(tres), whole)});
        }
      }
    }
    PrintFields(o.style, columns, rows, std::cout);
  }
  return absl::OkStatus();
}

int Sreport(const SreportOptions& o) {
  absl::StatusOr<Report> report = Parse(o.words);
  if (!report.ok()) {
    std::cerr << fmt::format("sreport: error: {}\n", report.status().message());
    return 1;
  }
  return SlurmStatus(CallController(
      o.connection, [&](ControllerClient& client) { return Run(client, o, *report); }));
}

}  // namespace
}  // namespace sreport_cli

void AddSreportCommand(CLI::App& app, int& exit_code) {
  using sreport_cli::Sreport;
  using sreport_cli::SreportOptions;
  auto o = std::make_shared<SreportOptions>();
  app.set_help_flag("--help", "print this help and exit");
  AddFieldsStyleOptions(app, o->style);
  app.add_option("-t", o->time_unit, "minutes (the default), hours, seconds or percent");
  app.add_option("-T,--tres", o->tres, "cpu (the default), gres/gpu, or both: cpu,gres/gpu");
  app.add_option("REPORT", o->words,
                 "cluster utilization | cluster accountutilizationbyuser | user topusage, with "
                 "Start=, End=, Users=, Accounts=, TopCount=")
      ->required();
  AddConnectionOptions(app, o->connection, ConfigShortName::kNone);
  app.footer(
      "Cohort's sreport: usage over a window (yesterday by default), summed from the jobs as\n"
      "sacct shows them (AllocCPUS and the GPUs held, times the time run in the window).\n"
      "Reported is the nodes' CPUs or GPUs times the window; Idle is what jobs left of it\n"
      "(down time included: it is not tracked apart). See docs/slurm.md.");
  app.callback([o, &exit_code] { exit_code = Sreport(*o); });
}

}  // namespace cohort::cli
