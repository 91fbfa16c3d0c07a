// SPDX-License-Identifier: Apache-2.0
#include "store/pg_conn.h"

#include <poll.h>

#include <charconv>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"

namespace cohort::controller::pg {

Param Number(long long value) { return {std::to_string(value), false, false}; }

std::string Describe(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (options == nullptr) {
    PQfreemem(error);
    return "(an unreadable StateDatabase)";
  }
  std::string out;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    const std::string_view key = o->keyword;
    if (o->val == nullptr || *o->val == '\0') continue;
    if (key == "host" || key == "hostaddr" || key == "port" || key == "dbname" || key == "user") {
      out += fmt::format("{}{}={}", out.empty() ? "" : " ", key, o->val);
    }
  }
  PQconninfoFree(options);
  return out.empty() ? "(libpq's defaults)" : out;
}

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(const std::string& conninfo,
                                                             std::chrono::seconds connect_timeout) {
  char* error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(conninfo.c_str(), &error);
  if (parsed == nullptr) {
    std::string why = error != nullptr ? error : "out of memory";
    PQfreemem(error);
    while (!why.empty() && why.back() == '\n') why.pop_back();
    return absl::InvalidArgumentError(
        fmt::format("StateDatabase cannot be read ({}); write libpq's key=value words, such as "
                    "\"host=db1 dbname=cohort user=cohort\", or a postgresql:// URI",
                    why));
  }
  bool has_timeout = false;
  for (PQconninfoOption* o = parsed; o->keyword != nullptr; ++o) {
    if (std::string_view(o->keyword) == "connect_timeout" && o->val != nullptr) has_timeout = true;
  }
  PQconninfoFree(parsed);
  // dbname first, expanded: it may be a whole connection string or URI.
  const std::string timeout = std::to_string(connect_timeout.count());
  const char* keys[] = {"dbname", "connect_timeout", "application_name", nullptr};
  const char* values[] = {conninfo.c_str(), has_timeout ? nullptr : timeout.c_str(),
                          "cohort-controller", nullptr};
  PGconn* conn = PQconnectdbParams(keys, values, 1);
  std::unique_ptr<Connection> out(new Connection(conn, Describe(conninfo)));
  if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
    std::string why = conn != nullptr ? PQerrorMessage(conn) : "out of memory";
    while (!why.empty() && why.back() == '\n') why.pop_back();
    return absl::UnavailableError(fmt::format(
        "cannot connect to the state database ({}): {}; check that PostgreSQL runs there and "
        "that StateDatabase names a database and a user that may use it",
        out->where_, why));
  }
  return out;
}

Connection::~Connection() { PQfinish(conn_); }

ParamArrays::ParamArrays(const std::vector<Param>& params) {
  for (const Param& p : params) {
    values.push_back(p.null ? nullptr : p.value.data());
    lengths.push_back(static_cast<int>(p.value.size()));
    formats.push_back(p.binary ? 1 : 0);
  }
}

absl::Status Connection::Error(const PGresult* result, std::string_view what) const {
  std::string message = result != nullptr ? PQresultErrorMessage(result) : "";
  if (message.empty()) message = PQerrorMessage(conn_);
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  const char* state = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  if (state != nullptr && state == kFencedState) {
    return absl::AbortedError(fmt::format("state database {}: {} while {}", where_, message, what));
  }
  if (PQstatus(conn_) != CONNECTION_OK || state == nullptr ||
      std::string_view(state).starts_with("08") || std::string_view(state).starts_with("57P")) {
    return absl::UnavailableError(
        fmt::format("state database {}: {} while {}; check that PostgreSQL runs and is reachable",
                    where_, message.empty() ? "the connection was lost" : message, what));
  }
  if (std::string_view(state) == "53100") {
    return absl::ResourceExhaustedError(
        fmt::format("state database {}: the database server's disk is full ({}) while {}", where_,
                    message, what));
  }
  return absl::InternalError(
      fmt::format("state database {}: {} (SQLSTATE {}) while {}", where_, message, state, what));
}

namespace {

bool Succeeded(const PGresult* result) {
  const ExecStatusType status = PQresultStatus(result);
  return status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
}

}  // namespace

absl::StatusOr<Result> Connection::Exec(std::string_view sql, const std::vector<Param>& params,
                                        std::string_view what, bool binary_result) {
  const std::string text(sql);
  Result result;
  if (params.empty() && !binary_result) {
    result.reset(PQexec(conn_, text.c_str()));
  } else {
    const ParamArrays arrays(params);
    result.reset(PQexecParams(conn_, text.c_str(), arrays.Count(), nullptr, arrays.values.data(),
                              arrays.lengths.data(), arrays.formats.data(), binary_result ? 1 : 0));
  }
  if (result == nullptr || !Succeeded(result.get())) return Error(result.get(), what);
  return result;
}

absl::StatusOr<Result> Connection::ExecWithin(std::string_view sql,
                                              const std::vector<Param>& params,
                                              std::string_view what,
                                              std::chrono::milliseconds within) {
  const std::string text(sql);
  const ParamArrays arrays(params);
  if (PQsendQueryParams(conn_, text.c_str(), arrays.Count(), nullptr, arrays.values.data(),
                        arrays.lengths.data(), arrays.formats.data(), 0) == 0) {
    return Error(nullptr, what);
  }
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (PQisBusy(conn_) != 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd polled{.fd = PQsocket(conn_), .events = POLLIN, .revents = 0};
    if (left.count() <= 0 || ::poll(&polled, 1, static_cast<int>(left.count())) == 0) {
      // Nothing came back in time: this connection is of no more use.
      // libpq fails every later call on a null connection, cleanly.
      PQfinish(conn_);
      conn_ = nullptr;
      return absl::UnavailableError(fmt::format(
          "state database {}: no answer within {} ms while {}; check the database server and "
          "the network to it",
          where_, within.count(), what));
    }
    if (PQconsumeInput(conn_) == 0) return Error(nullptr, what);
  }
  Result result(PQgetResult(conn_));
  while (PGresult* extra = PQgetResult(conn_)) PQclear(extra);
  if (result == nullptr || !Succeeded(result.get())) return Error(result.get(), what);
  return result;
}

absl::Status Connection::Prepare(const char* name, std::string_view sql) {
  const std::string text(sql);
  Result result(PQprepare(conn_, name, text.c_str(), 0, nullptr));
  if (result == nullptr || !Succeeded(result.get())) {
    return Error(result.get(), fmt::format("preparing {}", name));
  }
  return absl::OkStatus();
}

std::string_view Value(const PGresult* result, int row, int column) {
  return {PQgetvalue(result, row, column),
          static_cast<std::size_t>(PQgetlength(result, row, column))};
}

long long IntValue(const PGresult* result, int row, int column) {
  const std::string_view text = Value(result, row, column);
  long long out = 0;
  std::from_chars(text.data(), text.data() + text.size(), out);
  return out;
}

}  // namespace cohort::controller::pg
