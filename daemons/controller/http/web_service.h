// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "controller.h"
#include "http_server.h"
#include "rpc/api_token.h"
#include "rpc/authenticator.h"

namespace cohort::controller {

using http::HttpAnswer;
using http::HttpRequest;

/// What the controller's HTTP port serves (http_server.h hands it each
/// request):
/// - `/metrics`: the Prometheus exposition (metrics.h);
/// - `/api/v1/...`: the REST API, the Controller service's calls with
///   their messages in protobuf's JSON mapping (field names as in
///   cohort.proto), as slurmrestd serves Slurm's (docs/rest-api.md);
/// - `/`: the dashboard, static files over the REST API (dashboard/).
///
/// Who calls the REST API is established per request: a token the
/// controller signed (`Authorization: Bearer`, from `cohort token`), or a
/// MUNGE credential (`X-Cohort-Munge`); without either the caller is
/// anonymous and may read what PrivateData leaves readable. A token that
/// does not verify is refused (401), not taken as anonymous. Errors carry
/// the HTTP status of their kind and a JSON body {"error": {"code",
/// "message"}}. Any thread.
class WebService {
 public:
  WebService(Controller& controller, const Authenticator& authenticator,
             std::optional<TokenSigner> tokens)
      : controller_(controller), authenticator_(authenticator), tokens_(std::move(tokens)) {}

  /// Answers `request` through `answer`, once, from any thread.
  void Serve(HttpRequest request, std::function<void(HttpAnswer)> answer) const;

 private:
  /// Who calls, or the error that answers the request (a bad token).
  [[nodiscard]] absl::StatusOr<Identity> Identify(const HttpRequest& request) const;
  void ServeApi(const HttpRequest& request, std::string_view route,
                std::function<void(HttpAnswer)> answer) const;

  Controller& controller_;
  const Authenticator& authenticator_;
  std::optional<TokenSigner> tokens_;
};

/// The HTTP status of an error of `status`'s kind.
[[nodiscard]] int HttpStatusOf(const absl::Status& status);

/// Sets the fields of `message` from a URL query (`a=1&b=x,y`): each name
/// is a field of the message (as in cohort.proto, or its JSON name); a
/// repeated field takes values separated by commas; a bool field takes
/// true, false, 1, 0, or nothing (true). InvalidArgument naming the
/// parameter and the fields there are otherwise.
[[nodiscard]] absl::Status MessageFromQuery(std::string_view query,
                                            google::protobuf::Message& message);

}  // namespace cohort::controller
