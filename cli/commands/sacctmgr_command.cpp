// SPDX-License-Identifier: Apache-2.0
// sacctmgr: the account tree, its users and limits, the QOS, and the audit
// of their changes, in Slurm's words (add|modify|delete|show|list
// account|user|qos, show association|transactions; -i, -n, -p, -P, -s,
// where, set, format=).
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cohort/diagnostics.h"
#include "cohort/fmt_absl.h"
#include "cohort/text/slurm_time.h"
#include "commands/commands.h"
#include "commands/slurm_commands.h"
#include "format/job_format.h"
#include "format/print_fields.h"
#include "transport/controller_client.h"

namespace cohort::cli {
// Its own namespace: unity builds compile this file with other commands'.
namespace sacctmgr_cli {
namespace {

struct SacctmgrOptions {
  ConnectionOptions connection;
  bool immediate = false;
  FieldsStyle style;  // -n, -p, -P
  bool with_assoc = false;
  bool quiet = false;
  std::vector<std::string> words;
};

struct Field {
  std::string name;
  int width = 0;  // 0: the field's own
};

struct Command {
  std::string verb;    // add, modify, delete, show
  std::string entity;  // account, user, qos, association, transaction
  std::vector<std::string> names;
  std::vector<std::string> accounts;  // where Account= (users, associations)
  std::vector<std::string> users;     // where User= (accounts, associations)
  std::vector<std::string> parents;   // where Parent=
  std::vector<std::string> set;       // Key=Value
  std::vector<Field> format;
  bool with_assoc = false;
  bool tree = false;
};

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool OneOf(std::string_view word, std::initializer_list<std::string_view> names) {
  return std::any_of(names.begin(), names.end(),
                     [&](std::string_view n) { return EqualsIgnoreCase(word, n); });
}

absl::StatusOr<std::vector<Field>> ParseFormat(std::string_view value) {
  std::vector<Field> fields;
  for (const std::string& item : CommaStrings(value)) {
    Field field;
    const std::size_t percent = item.find('%');
    field.name = item.substr(0, percent);
    if (percent != std::string::npos) {
      const std::string width = item.substr(percent + 1);
      int n = 0;
      const auto [ptr, error] = std::from_chars(width.data(), width.data() + width.size(), n);
      if (width.empty() || error != std::errc() || ptr != width.data() + width.size() ||
          n < -1024 || n > 1024) {
        return absl::InvalidArgumentError(
            fmt::format("format={}: \"{}\" needs a width from 1 to 1024 after %", value, item));
      }
      field.width = n;
    }
    fields.push_back(std::move(field));
  }
  if (fields.empty()) return absl::InvalidArgumentError("format= names no field");
  return fields;
}

absl::StatusOr<Command> Parse(const std::vector<std::string>& words) {
  Command c;
  if (words.size() < 2) {
    return absl::InvalidArgumentError(
        "say what to do: sacctmgr add|modify|delete|show|list account|user|qos|association|"
        "transactions ...");
  }
  const std::string& verb = words[0];
  if (OneOf(verb, {"add", "create"})) {
    c.verb = "add";
  } else if (OneOf(verb, {"modify", "update"})) {
    c.verb = "modify";
  } else if (OneOf(verb, {"delete", "remove"})) {
    c.verb = "delete";
  } else if (OneOf(verb, {"show", "list"})) {
    c.verb = "show";
  } else {
    return absl::InvalidArgumentError(fmt::format(
        "\"{}\": sacctmgr's commands here are add, modify, delete, show and list", verb));
  }
  const std::string& entity = words[1];
  if (OneOf(entity, {"account", "accounts"})) {
    c.entity = "account";
  } else if (OneOf(entity, {"user", "users"})) {
    c.entity = "user";
  } else if (OneOf(entity, {"association", "associations", "assoc", "assocs"})) {
    c.entity = "association";
  } else if (OneOf(entity, {"transaction", "transactions", "txn"})) {
    c.entity = "transaction";
  } else if (OneOf(entity, {"qos", "qoss"})) {
    c.entity = "qos";
  } else {
    return absl::InvalidArgumentError(fmt::format(
        "\"{}\": sacctmgr works on account, user, qos, association and transactions", entity));
  }
  if (c.verb != "show" && (c.entity == "association" || c.entity == "transaction")) {
    return absl::InvalidArgumentError(fmt::format(
        "{} {}: change accounts, users and QOS; associations follow them", c.verb, c.entity));
  }
  bool setting = false;
  for (std::size_t i = 2; i < words.size(); ++i) {
    const std::string& word = words[i];
    const std::size_t eq = word.find('=');
    if (eq == std::string::npos) {
      if (EqualsIgnoreCase(word, "where")) {
        setting = false;
      } else if (EqualsIgnoreCase(word, "set")) {
        if (c.verb != "modify") {
          return absl::InvalidArgumentError(
              fmt::format("\"set\" goes with modify; {} takes Key=Value words", c.verb));
        }
        setting = true;
      } else if (EqualsIgnoreCase(word, "withassoc") || EqualsIgnoreCase(word, "withassocs")) {
        c.with_assoc = true;
      } else if (EqualsIgnoreCase(word, "tree")) {
        c.tree = true;
      } else if (setting) {
        return absl::InvalidArgumentError(
            fmt::format("\"{}\": after set come Key=Value words", word));
      } else {
        for (std::string& name : CommaStrings(word)) c.names.push_back(std::move(name));
      }
      continue;
    }
    const std::string key = word.substr(0, eq);
    const std::string value = word.substr(eq + 1);
    if (EqualsIgnoreCase(key, "format")) {
      absl::StatusOr<std::vector<Field>> fields = ParseFormat(value);
      if (!fields.ok()) return fields.status();
      c.format = *std::move(fields);
      continue;
    }
    if (OneOf(key, {"cluster", "clusters"})) continue;  // one cluster
    // Settings: after `set` for modify, any other key for add.
    const bool names_key = OneOf(key, {"name", "names"});
    const bool account_key = OneOf(key, {"account", "accounts", "acct"});
    if (setting || (c.verb == "add" && !names_key && !(c.entity == "user" && account_key))) {
      c.set.push_back(word);
      continue;
    }
    if (names_key) {
      for (std::string& name : CommaStrings(value)) c.names.push_back(std::move(name));
    } else if (account_key) {
      for (std::string& name : CommaStrings(value)) {
        (c.entity == "account" ? c.names : c.accounts).push_back(std::move(name));
      }
    } else if (OneOf(key, {"user", "users"})) {
      for (std::string& name : CommaStrings(value)) {
        (c.entity == "user" ? c.names : c.users).push_back(std::move(name));
      }
    } else if (OneOf(key, {"parent", "parentname"})) {
      for (std::string& name : CommaStrings(value)) c.parents.push_back(std::move(name));
    } else {
      return absl::InvalidArgumentError(fmt::format(
          "\"{}\": where takes Name=, Account=, User= and Parent=; {} the settings{}", word,
          c.verb == "modify" ? "put" : "give", c.verb == "modify" ? " after set" : ""));
    }
  }
  if (c.verb == "modify" && c.set.empty()) {
    return absl::InvalidArgumentError("modify needs settings: ... set Key=Value");
  }
  return c;
}

// ------------------------------------------------------------- showing

bool Listed(const std::vector<std::string>& names, const std::string& name) {
  return names.empty() || std::find(names.begin(), names.end(), name) != names.end();
}

std::string LimitText(bool has, int value) { return has ? std::to_string(value) : ""; }

std::string Tres(const std::string& text) { return text; }

struct Row {
  const v1::Association* line = nullptr;
  const v1::AccountTransaction* transaction = nullptr;
  std::string default_account;
  bool tree = false;
  const v1::Qos* qos = nullptr;
  // An association's QOS and default QOS in force: its own, else inherited.
  std::string qos_list;
  std::string default_qos;
};

Row OfLine(const v1::Association* line) {
  Row row;
  row.line = line;
  return row;
}
Row OfTransaction(const v1::AccountTransaction* transaction) {
  Row row;
  row.transaction = transaction;
  return row;
}
Row OfQos(const v1::Qos* qos) {
  Row row;
  row.qos = qos;
  return row;
}

std::string Seconds(bool has, std::int64_t seconds) {
  return has ? FormatSlurmTime(std::chrono::seconds(seconds)) : std::string();
}

// "cpu=12,gres/gpu=340": this period's use in TRES-minutes.
std::string UsedMinutes(double cpu_seconds, double gpu_seconds) {
  return fmt::format("cpu={:.0f},gres/gpu={:.0f}", cpu_seconds / 60, gpu_seconds / 60);
}

std::optional<std::pair<std::string, int>> QosValue(const std::string& f, const v1::Qos& q) {
  if (f == "name") return std::pair{q.name(), 10};
  if (f == "priority") return std::pair{std::to_string(q.priority()), 10};
  if (f == "gracetime") return std::pair{Seconds(true, q.grace_time_s()), 10};
  if (f == "preempt") return std::pair{fmt::format("{}", fmt::join(q.preempt(), ",")), 10};
  if (f == "preemptmode") {
    return std::pair{q.preempt_mode().empty() ? std::string("cluster") : q.preempt_mode(), 11};
  }
  if (f == "flags") return std::pair{std::string(), 10};
  if (f == "usagefactor") return std::pair{std::string("1.000000"), 11};
  if (f == "grptres") return std::pair{q.grp_tres(), 13};
  if (f == "grptresmins") return std::pair{q.grp_tres_mins(), 13};
  if (f == "grptresraw")
    return std::pair{UsedMinutes(q.period_cpu_seconds(), q.period_gpu_seconds()), 20};
  if (f == "grpjobs") return std::pair{LimitText(q.has_grp_jobs(), q.grp_jobs()), 7};
  if (f == "maxtres" || f == "maxtresperjob" || f == "maxtrespj") {
    return std::pair{q.max_tres_per_job(), 13};
  }
  if (f == "maxtrespu" || f == "maxtresperuser") {
    return std::pair{q.has_max_gpus_per_user() ? fmt::format("gres/gpu={}", q.max_gpus_per_user())
                                               : std::string(),
                     13};
  }
  if (f == "maxtrespa" || f == "maxtresperaccount") {
    return std::pair{q.has_max_gpus_per_account()
                         ? fmt::format("gres/gpu={}", q.max_gpus_per_account())
                         : std::string(),
                     13};
  }
  if (f == "maxjobspu" || f == "maxjobsperuser") {
    return std::pair{LimitText(q.has_max_jobs_per_user(), q.max_jobs_per_user()), 9};
  }
  if (f == "maxsubmitpu" || f == "maxsubmitjobsperuser" || f == "maxsubmitjobspu") {
    return std::pair{LimitText(q.has_max_submit_jobs_per_user(), q.max_submit_jobs_per_user()), 11};
  }
  if (f == "maxwall") return std::pair{Seconds(q.has_max_wall_s(), q.max_wall_s()), 11};
  if (f == "descr" || f == "description") {
    return std::pair{q.description().empty() ? q.name() : q.description(), 20};
  }
  if (f == "managed" || f == "source") {
    return std::pair{std::string(q.managed() ? "sacctmgr" : "cohort.conf"), 11};
  }
  return std::nullopt;
}

// A field's value and default width; none for a field this entity lacks.
std::optional<std::pair<std::string, int>> Value(const std::string& field, const Row& row) {
  const std::string f = Lower(field);
  if (row.qos != nullptr) return QosValue(f, *row.qos);
  if (row.transaction != nullptr) {
    const v1::AccountTransaction& t = *row.transaction;
    if (f == "time") return std::pair{FormatTimestamp(t.time_ms()), 19};
    if (f == "action") return std::pair{t.action(), 20};
    if (f == "actor") return std::pair{t.actor(), 10};
    if (f == "where") return std::pair{t.where(), 20};
    if (f == "info") return std::pair{t.info(), 40};
    return std::nullopt;
  }
  const v1::Association& a = *row.line;
  if (f == "account" || f == "acct") {
    const std::string indent(row.tree ? static_cast<std::size_t>(a.depth()) : 0, ' ');
    return std::pair{indent + a.account(), 10};
  }
  if (f == "user") return std::pair{a.user(), 10};
  if (f == "parentname" || f == "parent") {
    return std::pair{
        a.user().empty() ? (a.parent().empty() ? std::string("root") : a.parent()) : std::string(),
        10};
  }
  if (f == "cluster") return std::pair{std::string(), 10};
  if (f == "share" || f == "fairshare" || f == "shares") {
    return std::pair{a.shares() > 0 ? std::to_string(a.shares()) : std::string("1"), 9};
  }
  if (f == "grpjobs") return std::pair{LimitText(a.has_grp_jobs(), a.grp_jobs()), 7};
  if (f == "grptres") return std::pair{Tres(a.grp_tres()), 13};
  if (f == "grptresmins") return std::pair{Tres(a.grp_tres_mins()), 13};
  if (f == "grptresraw") {
    return std::pair{UsedMinutes(a.period_cpu_seconds(), a.period_gpu_seconds()), 20};
  }
  if (f == "qos") return std::pair{row.qos_list, 20};
  if (f == "defqos" || f == "def qos" || f == "defaultqos") return std::pair{row.default_qos, 9};
  if (f == "maxjobs") return std::pair{LimitText(a.has_max_jobs(), a.max_jobs()), 7};
  if (f == "maxsubmit" || f == "maxsubmitjobs") {
    return std::pair{LimitText(a.has_max_submit_jobs(), a.max_submit_jobs()), 9};
  }
  if (f == "maxtres" || f == "maxtresperjob") return std::pair{Tres(a.max_tres_per_job()), 13};
  if (f == "descr" || f == "description") {
    return std::pair{a.description().empty() ? a.account() : a.description(), 20};
  }
  if (f == "org" || f == "organization") {
    return std::pair{
        a.organization().empty() ? (a.parent().empty() ? "root" : a.parent()) : a.organization(),
        20};
  }
  if (f == "defaultaccount" || f == "def acct" || f == "defacct") {
    return std::pair{row.default_account, 10};
  }
  if (f == "admin" || f == "adminlevel") return std::pair{std::string("None"), 9};
  if (f == "managed" || f == "source") {
    return std::pair{std::string(a.managed() ? "sacctmgr" : "cohort.conf"), 11};
  }
  return std::nullopt;
}

std::string Header(const std::string& field) {
  const std::string f = Lower(field);
  if (f == "parentname" || f == "parent") return "Par Name";
  if (f == "defaultaccount" || f == "defacct") return "Def Acct";
  if (f == "maxsubmitjobs") return "MaxSubmit";
  if (f == "maxtresperjob") return "MaxTRES";
  if (f == "defqos" || f == "defaultqos") return "Def QOS";
  if (f == "maxtresperuser") return "MaxTRESPU";
  if (f == "maxtresperaccount") return "MaxTRESPA";
  if (f == "maxjobsperuser") return "MaxJobsPU";
  if (f == "maxsubmitjobsperuser" || f == "maxsubmitjobspu") return "MaxSubmitPU";
  if (f == "description") return "Descr";
  if (f == "organization") return "Org";
  return field;
}

void Print(const SacctmgrOptions& o, const std::vector<Field>& fields,
           const std::vector<Row>& rows) {
  std::vector<FieldColumn> columns;
  for (const Field& field : fields) {
    int width = field.width;
    if (width == 0 && !rows.empty()) {
      if (auto v = Value(field.name, rows.front())) width = v->second;
    }
    columns.push_back({Header(field.name), width == 0 ? 10 : width});
  }
  std::vector<std::vector<std::string>> cells;
  for (const Row& row : rows) {
    std::vector<std::string>& line = cells.emplace_back();
    for (const Field& field : fields) {
      std::optional<std::pair<std::string, int>> v = Value(field.name, row);
      line.push_back(v ? v->first : std::string());
    }
  }
  PrintFields(o.style, columns, cells, std::cout);
}

std::vector<Field> Defaults(std::initializer_list<std::string_view> names) {
  std::vector<Field> fields;
  for (std::string_view name : names) fields.push_back({std::string(name), 0});
  return fields;
}

absl::Status CheckFields(const std::vector<Field>& fields, const Row& sample,
                         std::string_view entity) {
  for (const Field& field : fields) {
    if (!Value(field.name, sample)) {
      return absl::InvalidArgumentError(fmt::format(
          "format: {} has no field {}; {}", entity, field.name,
          entity == "transactions" ? "the fields are Time, Action, Actor, Where, Info"
          : entity == "qos" ? "the fields are Name, Priority, GraceTime, Preempt, PreemptMode, "
                              "Flags, UsageFactor, GrpTRES, GrpTRESMins, GrpTRESRaw, GrpJobs, "
                              "MaxTRES, MaxTRESPU, MaxTRESPA, MaxJobsPU, MaxSubmitPU, MaxWall, "
                              "Descr, Source"
                            : "the fields are Account, User, ParentName, Share, GrpJobs, GrpTRES, "
                              "GrpTRESMins, GrpTRESRaw, MaxJobs, MaxSubmit, MaxTRES, QOS, DefQOS, "
                              "Descr, Org, DefaultAccount, Admin, Cluster"));
    }
  }
  return absl::OkStatus();
}

absl::Status ShowQos(const SacctmgrOptions& o, const Command& c,
                     const v1::ListAccountsResponse& response) {
  std::vector<Row> rows;
  for (const v1::Qos& qos : response.qos()) {
    if (Listed(c.names, qos.name())) rows.push_back(OfQos(&qos));
  }
  const std::vector<Field> fields =
      c.format.empty()
          ? Defaults({"Name", "Priority", "GraceTime", "Preempt", "PreemptMode", "Flags",
                      "UsageFactor", "GrpTRES", "GrpTRESMins", "GrpJobs", "MaxTRES", "MaxTRESPU",
                      "MaxTRESPA", "MaxJobsPU", "MaxSubmitPU", "MaxWall"})
          : c.format;
  const v1::Qos sample;
  if (absl::Status s = CheckFields(fields, OfQos(&sample), "qos"); !s.ok()) return s;
  Print(o, fields, rows);
  return absl::OkStatus();
}

absl::Status Show(ControllerClient& client, const SacctmgrOptions& o, const Command& c) {
  if (c.entity == "transaction") {
    absl::StatusOr<v1::ListTransactionsResponse> response =
        client.ListTransactions(v1::ListTransactionsRequest{});
    if (!response.ok()) return response.status();
    std::vector<Row> rows;
    for (const v1::AccountTransaction& t : response->transactions()) {
      rows.push_back(OfTransaction(&t));
    }
    const std::vector<Field> fields =
        c.format.empty() ? Defaults({"Time", "Action", "Actor", "Where", "Info"}) : c.format;
    const v1::AccountTransaction sample;
    if (absl::Status s = CheckFields(fields, OfTransaction(&sample), "transactions"); !s.ok()) {
      return s;
    }
    Print(o, fields, rows);
    return absl::OkStatus();
  }
  absl::StatusOr<v1::ListAccountsResponse> response =
      client.ListAccounts(v1::ListAccountsRequest{});
  if (!response.ok()) return response.status();
  if (c.entity == "qos") return ShowQos(o, c, *response);
  // Each user's default account: the one marked, else its first.
  std::map<std::string, std::string> defaults;
  for (const v1::Association& line : response->associations()) {
    if (line.user().empty()) continue;
    if (line.is_default() || !defaults.contains(line.user()))
      defaults[line.user()] = line.account();
  }
  const bool assoc = c.with_assoc || o.with_assoc || c.entity == "association";
  std::vector<Row> rows;
  std::map<std::string, bool> user_seen;
  // QOS= and DefaultQOS= in force: an association's own, else its
  // account's, else up the tree (accounts come before those under them).
  std::map<std::string, std::pair<std::string, std::string>> account_qos;
  for (const v1::Association& line : response->associations()) {
    const bool user_line = !line.user().empty();
    const auto& [up_list, up_default] = account_qos[user_line ? line.account() : line.parent()];
    std::string qos_list =
        line.qos().empty() ? up_list : fmt::format("{}", fmt::join(line.qos(), ","));
    std::string default_qos = line.default_qos().empty() ? up_default : line.default_qos();
    if (!user_line) account_qos[line.account()] = {qos_list, default_qos};
    Row row{.line = &line,
            .transaction = nullptr,
            .default_account = user_line ? defaults[line.user()] : std::string(),
            .tree = c.tree,
            .qos = nullptr,
            .qos_list = std::move(qos_list),
            .default_qos = std::move(default_qos)};
    if (c.entity == "account") {
      if (!Listed(c.names, line.account()) || !Listed(c.parents, line.parent())) continue;
      if (user_line && (!assoc || !Listed(c.users, line.user()))) continue;
    } else if (c.entity == "user") {
      if (!user_line || !Listed(c.names, line.user()) || !Listed(c.accounts, line.account())) {
        continue;
      }
      // Without associations, one line per user.
      if (!assoc && std::exchange(user_seen[line.user()], true)) continue;
    } else {
      const bool named = Listed(c.names, line.account()) && Listed(c.accounts, line.account());
      if (!named || (!c.users.empty() && !Listed(c.users, line.user()))) continue;
    }
    rows.push_back(row);
  }
  std::vector<Field> fields = c.format;
  if (fields.empty()) {
    if (c.entity == "account") {
      fields = assoc ? Defaults({"Account", "Descr", "Org", "ParentName", "User", "Share",
                                 "GrpJobs", "GrpTRES", "GrpTRESMins", "MaxJobs", "MaxSubmit",
                                 "MaxTRES", "QOS", "DefQOS"})
                     : Defaults({"Account", "Descr", "Org"});
    } else if (c.entity == "user") {
      fields = assoc ? Defaults({"User", "DefaultAccount", "Admin", "Account", "Share", "MaxJobs",
                                 "MaxSubmit", "MaxTRES", "GrpTRES", "GrpTRESMins", "QOS", "DefQOS"})
                     : Defaults({"User", "DefaultAccount", "Admin"});
    } else {
      fields =
          Defaults({"Account", "User", "ParentName", "Share", "GrpJobs", "GrpTRES", "GrpTRESMins",
                    "GrpTRESRaw", "MaxJobs", "MaxSubmit", "MaxTRES", "QOS", "DefQOS"});
    }
  }
  const v1::Association sample;
  if (absl::Status s = CheckFields(fields, OfLine(&sample), c.entity); !s.ok()) return s;
  Print(o, fields, rows);
  return absl::OkStatus();
}

// ------------------------------------------------------------- changing

bool Confirmed(const SacctmgrOptions& o, const Command& c) {
  if (o.immediate) return true;
  std::cout << fmt::format(
      " {} {} {}{}{}\n", c.verb, c.entity, fmt::join(c.names, ","),
      c.accounts.empty() ? std::string() : fmt::format(" in {}", fmt::join(c.accounts, ",")),
      c.set.empty() ? std::string() : fmt::format(": {}", fmt::join(c.set, " ")));
  std::cout << "Would you like to commit changes? (You have 30 seconds to decide)\n(N/y): "
            << std::flush;
  std::string answer;
  if (!std::getline(std::cin, answer)) answer.clear();
  const bool yes = !answer.empty() && (answer[0] == 'y' || answer[0] == 'Y');
  if (!yes) std::cout << " Changes Discarded\n";
  return yes;
}

absl::Status Change(ControllerClient& client, const SacctmgrOptions& o, const Command& c) {
  if (c.names.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("name the {}s: sacctmgr {} {} NAME ...", c.entity, c.verb, c.entity));
  }
  if (c.entity == "account" && !c.users.empty()) {
    return absl::InvalidArgumentError("User= goes with users: sacctmgr add user NAME Account=A");
  }
  if (!Confirmed(o, c)) return absl::OkStatus();
  v1::UpdateAccountsRequest request;
  request.set_verb(c.verb);
  request.set_entity(c.entity);
  for (const std::string& name : c.names) request.add_names(name);
  for (const std::string& account : c.accounts) request.add_accounts(account);
  for (const std::string& word : c.set) request.add_set(word);
  absl::StatusOr<v1::UpdateAccountsResponse> response = client.UpdateAccounts(request);
  if (!response.ok()) return response.status();
  if (!o.quiet) {
    for (const v1::AccountTransaction& t : response->done()) {
      std::cout << fmt::format(" {}: {}{}\n", t.action(), t.where(),
                               t.info().empty() ? std::string() : "  " + t.info());
    }
  }
  return absl::OkStatus();
}

int Sacctmgr(const SacctmgrOptions& o) {
  absl::StatusOr<Command> command = Parse(o.words);
  if (!command.ok()) {
    std::cerr << fmt::format("sacctmgr: error: {}\n", command.status().message());
    return 1;
  }
  return SlurmStatus(CallController(o.connection, [&](ControllerClient& client) {
    return command->verb == "show" ? Show(client, o, *command) : Change(client, o, *command);
  }));
}

}  // namespace
}  // namespace sacctmgr_cli

void AddSacctmgrCommand(CLI::App& app, int& exit_code) {
  using sacctmgr_cli::Sacctmgr;
  using sacctmgr_cli::SacctmgrOptions;
  auto o = std::make_shared<SacctmgrOptions>();
  app.set_help_flag("--help", "print this help and exit");
  app.add_flag("-i,--immediate", o->immediate, "commit changes without asking");
  AddFieldsStyleOptions(app, o->style);
  app.add_flag("-s,--associations", o->with_assoc, "list users' and accounts' associations");
  app.add_flag("-Q,--quiet", o->quiet, "print nothing but errors");
  app.add_option("COMMAND", o->words,
                 "add|modify|delete|show|list account|user|qos|association|transactions, names, "
                 "where ..., set Key=Value, format=F1,F2%W")
      ->required();
  AddConnectionOptions(app, o->connection, ConfigShortName::kNone);
  app.footer(
      "Cohort's sacctmgr: the account tree (Parent=), users in accounts, their shares and\n"
      "limits (GrpTRES=, GrpTRESMins=, GrpJobs=, MaxJobs=, MaxSubmitJobs=, MaxTRESPerJob=,\n"
      "QOS=, DefaultQOS=), the QOS and their limits, and the audit of every change (show\n"
      "transactions). Changes are root's and Operators='s, apply at once, and survive\n"
      "restarts. See docs/slurm.md.");
  app.callback([o, &exit_code] { exit_code = Sacctmgr(*o); });
}

}  // namespace cohort::cli
