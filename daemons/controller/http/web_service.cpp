// SPDX-License-Identifier: Apache-2.0
#include "http/web_service.h"

#include <charconv>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>

#include <nlohmann/json.hpp>

#include "http/dashboard_files.h"

namespace cohort::controller {
namespace {

using Answer = std::function<void(HttpAnswer)>;

constexpr std::string_view kJson = "application/json";
constexpr std::string_view kApiPrefix = "/api/v1/";

// The routes of the REST API, for the answer to one that is none.
constexpr std::string_view kRoutes =
    "GET jobs, POST jobs, GET jobs/ID, DELETE jobs/ID, GET jobs/ID/why, GET jobs/ID/usage, "
    "GET history, GET nodes, "
    "GET partitions, GET topology, GET shares, GET accounts, GET transactions, GET reservations, "
    "GET priorities";

std::string ErrorJson(const absl::Status& status) {
  nlohmann::json body = {
      {"error",
       {{"code", absl::StatusCodeToString(status.code())}, {"message", status.message()}}}};
  // Messages may quote what the client sent, which need not be UTF-8.
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + '\n';
}

HttpAnswer ErrorAnswer(const absl::Status& status) {
  return {.status = HttpStatusOf(status),
          .content_type = std::string(kJson),
          .body = ErrorJson(status),
          .cache_control = "no-store"};
}

HttpAnswer JsonAnswer(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string body;
  const auto printed = google::protobuf::util::MessageToJsonString(message, &body, options);
  if (!printed.ok()) {
    return ErrorAnswer(absl::InternalError(
        fmt::format("cannot write the answer as JSON: {}", printed.ToString())));
  }
  body += '\n';
  return {.status = 200,
          .content_type = std::string(kJson),
          .body = std::move(body),
          .cache_control = "no-store"};
}

// Calls `method` of the controller and answers with its response as JSON.
template <typename Request, typename Response>
void Call(Controller& controller, void (Controller::*method)(Request, Identity, Reply<Response>),
          Request request, Identity who, Answer answer) {
  (controller.*method)(std::move(request), std::move(who),
                       [answer = std::move(answer)](absl::StatusOr<Response> result) {
                         answer(result.ok() ? JsonAnswer(*result) : ErrorAnswer(result.status()));
                       });
}

// `text` with %XX and '+' decoded; nullopt for a malformed escape.
std::optional<std::string> UrlDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
    } else if (text[i] == '%') {
      unsigned value = 0;
      if (i + 2 >= text.size()) return std::nullopt;
      const auto [end, error] =
          std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16);
      if (error != std::errc() || end != text.data() + i + 3) return std::nullopt;
      out += static_cast<char>(value);
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

// The message `body` holds in protobuf's JSON mapping (empty: an empty one).
template <typename Message>
absl::StatusOr<Message> MessageFromBody(std::string_view body) {
  Message message;
  if (body.empty()) return message;
  const auto parsed = google::protobuf::util::JsonStringToMessage(body, &message);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("the body is not a {} in JSON: {}; see docs/rest-api.md for its fields",
                    Message::descriptor()->name(), parsed.ToString()));
  }
  return message;
}

template <typename Message>
absl::StatusOr<Message> MessageOfQuery(std::string_view query) {
  Message message;
  if (absl::Status s = MessageFromQuery(query, message); !s.ok()) return s;
  return message;
}

}  // namespace

int HttpStatusOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kFailedPrecondition:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

absl::Status MessageFromQuery(std::string_view query, google::protobuf::Message& message) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Descriptor& descriptor = *message.GetDescriptor();
  auto fields = [&] {
    std::vector<std::string> names;
    for (int i = 0; i < descriptor.field_count(); ++i) names.push_back(descriptor.field(i)->name());
    return names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "));
  };
  nlohmann::json object = nlohmann::json::object();
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    const std::optional<std::string> name = UrlDecode(pair.substr(0, eq));
    const std::optional<std::string> value =
        eq == std::string_view::npos ? std::string() : UrlDecode(pair.substr(eq + 1));
    if (!name || !value) {
      return absl::InvalidArgumentError(fmt::format(
          "query parameter '{}' has a malformed %-escape; escape each byte as %XX", pair));
    }
    const FieldDescriptor* field = descriptor.FindFieldByName(*name);
    for (int i = 0; field == nullptr && i < descriptor.field_count(); ++i) {
      if (descriptor.field(i)->json_name() == *name) field = descriptor.field(i);
    }
    if (field == nullptr || field->type() == FieldDescriptor::TYPE_MESSAGE) {
      return absl::InvalidArgumentError(
          fmt::format("query parameter '{}' is not a field of {}; its fields are: {}", *name,
                      descriptor.name(), fields()));
    }
    auto scalar = [&](std::string_view text) -> absl::StatusOr<nlohmann::json> {
      if (field->type() != FieldDescriptor::TYPE_BOOL) return nlohmann::json(std::string(text));
      if (text.empty() || text == "true" || text == "1") return nlohmann::json(true);
      if (text == "false" || text == "0") return nlohmann::json(false);
      return absl::InvalidArgumentError(
          fmt::format("query parameter '{}' is '{}'; give true or false", *name, text));
    };
    if (field->is_repeated()) {
      nlohmann::json& list = object[field->name()];
      if (!list.is_array()) list = nlohmann::json::array();
      std::string_view rest = *value;
      while (!rest.empty()) {
        const std::size_t comma = rest.find(',');
        absl::StatusOr<nlohmann::json> item = scalar(rest.substr(0, comma));
        if (!item.ok()) return item.status();
        list.push_back(*std::move(item));
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      }
    } else {
      absl::StatusOr<nlohmann::json> item = scalar(*value);
      if (!item.ok()) return item.status();
      object[field->name()] = *std::move(item);
    }
  }
  std::string json;
  try {
    json = object.dump();
  } catch (const nlohmann::json::type_error&) {
    return absl::InvalidArgumentError(
        "the query is not UTF-8 once its %-escapes are decoded; send text as UTF-8");
  }
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, &message);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("the query does not fit {}: {}; its fields are: {}", descriptor.name(),
                    parsed.ToString(), fields()));
  }
  return absl::OkStatus();
}

absl::StatusOr<Identity> WebService::Identify(const HttpRequest& request) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (!request.authorization.empty()) {
    const std::string_view header = request.authorization;
    if (!header.starts_with(kBearer)) {
      return absl::UnauthenticatedError(
          "the Authorization header is not 'Bearer TOKEN'; get a token with: cohort token");
    }
    if (!tokens_) {
      return absl::UnauthenticatedError(
          "this controller takes no tokens (it has no TokenKeyFile); send X-Cohort-Munge instead");
    }
    absl::StatusOr<TokenClaims> claims = tokens_->Verify(header.substr(kBearer.size()));
    if (!claims.ok()) return claims.status();
    return authenticator_.ByToken(claims->uid);
  }
  Identity who = authenticator_.OverTcp(request.munge);
  if (request.munge.empty()) {
    who.anonymous_why = "no token or MUNGE credential came with it; get a token with: cohort token";
  }
  return who;
}

void WebService::Serve(HttpRequest request, Answer answer) const {
  if (request.path == "/metrics" && request.method == "GET") {
    controller_.Metrics([answer = std::move(answer)](absl::StatusOr<std::string> text) {
      answer({.status = 200,
              .content_type = "text/plain; version=0.0.4; charset=utf-8",
              .body = text.ok() ? *std::move(text) : std::string(),
              .cache_control = "no-store"});
    });
    return;
  }
  if (request.path.starts_with(kApiPrefix)) {
    ServeApi(request, std::string_view(request.path).substr(kApiPrefix.size()), std::move(answer));
    return;
  }
  const std::optional<StaticFile> file =
      request.method == "GET" ? DashboardFile(request.path) : std::nullopt;
  if (file) {
    answer({.status = 200,
            .content_type = std::string(file->content_type),
            .body = std::string(file->body),
            .cache_control = "no-cache"});
    return;
  }
  answer({.status = 404,
          .content_type = "text/plain; charset=utf-8",
          .body = fmt::format("no page {} {}; the controller serves GET / (the dashboard), GET "
                              "/metrics and /api/v1/ (docs/rest-api.md)\n",
                              request.method, request.path),
          .cache_control = ""});
}

void WebService::ServeApi(const HttpRequest& request, std::string_view route, Answer answer) const {
  absl::StatusOr<Identity> who = Identify(request);
  if (!who.ok()) {
    answer(ErrorAnswer(who.status()));
    return;
  }
  // route: "jobs", "jobs/ID" or "jobs/ID/why", ...
  const std::size_t slash = route.find('/');
  const std::string_view collection = route.substr(0, slash);
  std::string_view id =
      slash == std::string_view::npos ? std::string_view() : route.substr(slash + 1);
  std::string_view sub;
  if (const std::size_t inner = id.find('/'); inner != std::string_view::npos) {
    sub = id.substr(inner + 1);
    id = id.substr(0, inner);
  }
  const std::string& method = request.method;
  auto refuse = [&](absl::Status status) { answer(ErrorAnswer(status)); };
  // Parses the request message, then calls.
  auto call = [&]<typename Request, typename Response>(
                  void (Controller::*rpc)(Request, Identity, Reply<Response>),
                  absl::StatusOr<Request> parsed) {
    if (!parsed.ok()) {
      refuse(parsed.status());
      return;
    }
    Call(controller_, rpc, *std::move(parsed), *std::move(who), std::move(answer));
  };
  const bool bare = id.empty() && slash == std::string_view::npos;
  if (collection == "jobs" && bare && method == "GET") {
    call(&Controller::ListJobs, MessageOfQuery<v1::ListJobsRequest>(request.query));
  } else if (collection == "jobs" && bare && method == "POST") {
    call(&Controller::SubmitJob, MessageFromBody<v1::SubmitJobRequest>(request.body));
  } else if (collection == "jobs" && !id.empty() && sub.empty() && method == "GET") {
    v1::GetJobRequest get;
    get.set_job_ref(std::string(id));
    call(&Controller::GetJob, absl::StatusOr<v1::GetJobRequest>(std::move(get)));
  } else if (collection == "jobs" && !id.empty() && sub.empty() && method == "DELETE") {
    absl::StatusOr<v1::CancelJobRequest> cancel =
        MessageOfQuery<v1::CancelJobRequest>(request.query);
    if (cancel.ok()) cancel->add_job_refs(std::string(id));
    call(&Controller::CancelJob, std::move(cancel));
  } else if (collection == "jobs" && !id.empty() && sub == "usage" && method == "GET") {
    v1::JobUsageRequest usage;
    usage.set_job_ref(std::string(id));
    call(&Controller::GetJobUsage, absl::StatusOr<v1::JobUsageRequest>(std::move(usage)));
  } else if (collection == "jobs" && !id.empty() && sub == "why" && method == "GET") {
    v1::ExplainJobRequest explain;
    explain.set_job_ref(std::string(id));
    call(&Controller::ExplainJob, absl::StatusOr<v1::ExplainJobRequest>(std::move(explain)));
  } else if (collection == "history" && bare && method == "GET") {
    call(&Controller::JobHistory, MessageOfQuery<v1::JobHistoryRequest>(request.query));
  } else if (collection == "nodes" && bare && method == "GET") {
    call(&Controller::ListNodes, MessageOfQuery<v1::ListNodesRequest>(request.query));
  } else if (collection == "partitions" && bare && method == "GET") {
    call(&Controller::ListPartitions, MessageOfQuery<v1::ListPartitionsRequest>(request.query));
  } else if (collection == "topology" && bare && method == "GET") {
    call(&Controller::GetTopology, MessageOfQuery<v1::GetTopologyRequest>(request.query));
  } else if (collection == "shares" && bare && method == "GET") {
    call(&Controller::GetShares, MessageOfQuery<v1::SharesRequest>(request.query));
  } else if (collection == "accounts" && bare && method == "GET") {
    call(&Controller::ListAccounts, MessageOfQuery<v1::ListAccountsRequest>(request.query));
  } else if (collection == "reservations" && bare && method == "GET") {
    call(&Controller::ListReservations, MessageOfQuery<v1::ListReservationsRequest>(request.query));
  } else if (collection == "transactions" && bare && method == "GET") {
    call(&Controller::ListTransactions, MessageOfQuery<v1::ListTransactionsRequest>(request.query));
  } else if (collection == "priorities" && bare && method == "GET") {
    call(&Controller::GetPriorities, MessageOfQuery<v1::PriorityRequest>(request.query));
  } else {
    refuse(absl::NotFoundError(
        fmt::format("no route {} {}; the REST API serves: {}", method, request.path, kRoutes)));
  }
}

}  // namespace cohort::controller
