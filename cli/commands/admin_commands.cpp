// SPDX-License-Identifier: Apache-2.0
// `cohort token` and `cohort reconfigure`: the calls on the controller
// itself, as Slurm's `scontrol token` and `scontrol reconfigure`.
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

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

// How long reconfigure waits for the controller that applies the files.
constexpr std::chrono::seconds kRestartWait{60};
constexpr std::chrono::milliseconds kRestartPoll{50};

// Whether a controller other than `before` answers now.
bool NewInstanceAnswers(const ConnectionOptions& connection, const std::string& before) {
  absl::StatusOr<ControllerClient> client = ControllerClient::Connect(connection);
  if (!client.ok()) return false;
  absl::StatusOr<v1::PingResponse> ping = client->Ping(v1::PingRequest{});
  return ping.ok() && ping->instance() != before;
}

// The controller applies valid files by restarting in place; the answer
// waits for the new one, so that the next command finds it (as Slurm's
// reconfigure returns once slurmctld runs the new files).
int Reconfigure(const ConnectionOptions& connection) {
  std::string before;
  std::string summary;
  if (const int code = CallController(connection,
                                      [&](ControllerClient& client) -> absl::Status {
                                        absl::StatusOr<v1::PingResponse> ping =
                                            client.Ping(v1::PingRequest{});
                                        if (ping.ok()) before = ping->instance();
                                        absl::StatusOr<v1::ReconfigureResponse> response =
                                            client.Reconfigure(v1::ReconfigureRequest{});
                                        if (!response.ok()) return response.status();
                                        summary = response->summary();
                                        return absl::OkStatus();
                                      });
      code != 0) {
    return code;
  }
  // A controller without Ping (an older release) is not waited for.
  if (!before.empty()) {
    const auto deadline = std::chrono::steady_clock::now() + kRestartWait;
    while (!NewInstanceAnswers(connection, before)) {
      if (std::chrono::steady_clock::now() >= deadline) {
        std::cout << summary << '\n';
        std::cerr << fmt::format(
            "cohort: the controller has not answered in the {} s since; see its log for why "
            "it did not start again\n",
            kRestartWait.count());
        return 1;
      }
      std::this_thread::sleep_for(kRestartPoll);
    }
  }
  std::cout << summary << '\n';
  return 0;
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
