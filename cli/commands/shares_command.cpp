// SPDX-License-Identifier: Apache-2.0
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"
#include "commands/commands.h"
#include "commands/slurm_commands.h"
#include "format/job_format.h"
#include "format/policy_format.h"
#include "transport/controller_client.h"

namespace cohort::cli {
namespace {

struct SharesOptions {
  ConnectionOptions connection;
  std::string account;
  bool json = false;
  bool no_header = false;
};

int Shares(const SharesOptions& o) {
  return CallController(o.connection, [&](ControllerClient& client) -> absl::Status {
    absl::StatusOr<v1::SharesResponse> response = client.GetShares(v1::SharesRequest{});
    if (!response.ok()) return response.status();
    if (!o.account.empty()) {
      v1::SharesResponse one = *response;
      one.clear_rows();
      for (const v1::AccountShare& row : response->rows()) {
        if (row.account() == o.account) *one.add_rows() = row;
      }
      if (one.rows().empty()) {
        return absl::NotFoundError(
            fmt::format("shares: no account {}; see cohort shares for the accounts (cohort.conf's "
                        "AccountName= lines, and every account a job has charged)",
                        o.account));
      }
      *response = std::move(one);
    }
    if (o.json) {
      std::cout << SharesToJson(*response).dump(2) << '\n';
      return absl::OkStatus();
    }
    std::vector<std::vector<std::string>> rows = SharesRows(*response);
    if (o.no_header) rows.erase(rows.begin());
    PrintColumns(rows, std::cout);
    if (!o.no_header) {
      std::cout << fmt::format("Usage decays with a half-life of {}.\n",
                               FormatLimit(response->half_life_s()));
    }
    return absl::OkStatus();
  });
}

}  // namespace

void AddSharesCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SharesOptions>();
  CLI::App* shares = app.add_subcommand(
      "shares",
      "show each account's fair share, its decayed usage and its fair-share factor "
      "(like sshare)");
  shares->add_option("-A,--account", o->account, "only this account and its users");
  shares->add_flag("--noheader", o->no_header, "leave out the header and the half-life line");
  shares->add_flag("--json", o->json, "print {\"half_life_s\", \"rows\": [...]} as JSON");
  AddConnectionOptions(*shares, o->connection);
  shares->footer(
      "RawShares are cohort.conf's Shares= (and UserShares=); NormShares the account's part of\n"
      "all shares (a user's part of its account's). RawUsage is GPU-hours (CPU-hours for jobs\n"
      "without GPUs), halved every PriorityDecayHalfLife; NormUsage its part of all usage.\n"
      "FairShare is the factor in the priority: 1 for no usage, 0.5 at exactly its share, less\n"
      "as the account uses more than its share.");
  shares->callback([o, &exit_code] { exit_code = Shares(*o); });
}

void AddSshareCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SharesOptions>();
  app.set_help_flag("--help", "print this help and exit");  // -h is --noheader
  app.add_option("-A,--accounts", o->account, "only this account and its users");
  app.add_flag("-h,--noheader", o->no_header, "leave out the header");
  app.add_flag("-a,--all,-l,--long,-v,--verbose")
      ->description("accepted: every user and column is always shown");
  AddConnectionOptions(app, o->connection, ConfigShortName::kNone);
  app.footer("Cohort's sshare: the accounts' fair shares and usage. See docs/slurm.md.");
  app.callback([o, &exit_code] { exit_code = SlurmStatus(Shares(*o)); });
}

}  // namespace cohort::cli
