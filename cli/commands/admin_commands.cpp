// SPDX-License-Identifier: Apache-2.0
// `cohort token` and `cohort reconfigure`: the calls on the controller
// itself, as Slurm's `scontrol token` and `scontrol reconfigure`.
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "commands/commands.h"
#include "transport/controller_client.h"

namespace cohort::cli {
namespace {

struct TokenOptions {
  ConnectionOptions connection;
  std::string user;
  std::int64_t lifespan_s = 0;
};

int Token(const TokenOptions& o) {
  return CallController(o.connection, [&](ControllerClient& client) -> absl::Status {
    v1::IssueTokenRequest request;
    request.set_user_name(o.user);
    request.set_lifespan_s(o.lifespan_s);
    absl::StatusOr<v1::IssueTokenResponse> response = client.IssueToken(request);
    if (!response.ok()) return response.status();
    std::cout << "COHORT_TOKEN=" << response->token() << '\n';
    return absl::OkStatus();
  });
}

int Reconfigure(const ConnectionOptions& connection) {
  return CallController(connection, [&](ControllerClient& client) -> absl::Status {
    absl::StatusOr<v1::ReconfigureResponse> response = client.Reconfigure(v1::ReconfigureRequest{});
    if (!response.ok()) return response.status();
    std::cout << response->summary() << '\n';
    return absl::OkStatus();
  });
}

}  // namespace

void AddReconfigureCommand(CLI::App& app, int& exit_code) {
  auto connection = std::make_shared<ConnectionOptions>();
  CLI::App* reconfigure = app.add_subcommand(
      "reconfigure",
      "reread cohort.conf and the topology, and apply them if valid (root only; like scontrol "
      "reconfigure)");
  AddConnectionOptions(*reconfigure, *connection, ConfigShortName::kNone);
  reconfigure->footer(
      "The controller checks the files, and that every job it holds still fits them (its\n"
      "partition and, running, its nodes). When they do, it restarts in place on the same\n"
      "ports: jobs keep running, agents reconnect. Otherwise nothing changes and every error\n"
      "is printed. SIGHUP to cohort-controller does the same.");
  reconfigure->callback([connection, &exit_code] { exit_code = Reconfigure(*connection); });
}

void AddTokenCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<TokenOptions>();
  CLI::App* token = app.add_subcommand(
      "token", "get a token for the controller's REST API (like scontrol token)");
  token->add_option("-u,--user", o->user, "for this user (root and Operators= only)");
  token->add_option("--lifespan", o->lifespan_s, "seconds until it expires (default 1800)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{365} * 24 * 3600));
  AddConnectionOptions(*token, o->connection);
  token->footer(
      "Prints COHORT_TOKEN=TOKEN. Present it as the HTTP header\n"
      "  Authorization: Bearer TOKEN\n"
      "to /api/v1/ on the controller's HttpPort, or open the dashboard as\n"
      "  https://CONTROLLER:HttpPort/#token=TOKEN   (http:// without TLSCertFile)\n"
      "Anyone holding it acts as its user until it expires; a token cannot get another.");
  token->callback([o, &exit_code] { exit_code = Token(*o); });
}

}  // namespace cohort::cli
