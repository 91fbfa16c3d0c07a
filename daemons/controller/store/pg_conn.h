// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

/// One libpq connection, and what the controller's PostgreSQL code shares:
/// results that free themselves, parameters, errors that say what to do.
namespace cohort::controller::pg {

struct ResultFree {
  void operator()(PGresult* result) const { PQclear(result); }
};
using Result = std::unique_ptr<PGresult, ResultFree>;

/// One parameter of a statement: text (numbers too), binary (bytea), or NULL.
struct Param {
  std::string value;
  bool binary = false;
  bool null = false;
};
[[nodiscard]] inline Param Text(std::string value) { return {std::move(value), false, false}; }
[[nodiscard]] inline Param Bytes(std::string value) { return {std::move(value), true, false}; }
[[nodiscard]] Param Number(long long value);

/// Where a connection string points, without its password: "host=db1
/// port=5432 dbname=cohort user=cohort", for logs and messages.
[[nodiscard]] std::string Describe(const std::string& conninfo);

class Connection {
 public:
  /// Connects to `conninfo` (libpq's key=value words or a URI), within
  /// `connect_timeout` unless the string sets its own. Unavailable, with
  /// libpq's reason and what to check, when it cannot.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Connection>> Open(
      const std::string& conninfo, std::chrono::seconds connect_timeout);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  [[nodiscard]] PGconn* get() { return conn_; }
  [[nodiscard]] const std::string& Where() const { return where_; }

  /// Runs one statement (no parameters: several, separated by ';') and
  /// returns its result; an error result is an error status naming `what`.
  /// Binary results when `binary_result`.
  [[nodiscard]] absl::StatusOr<Result> Exec(std::string_view sql, const std::vector<Param>& params,
                                            std::string_view what, bool binary_result = false);
  /// As Exec, giving up (Unavailable, the connection closed) when no answer
  /// came within `within`: a lease must not wait on a dead network.
  [[nodiscard]] absl::StatusOr<Result> ExecWithin(std::string_view sql,
                                                  const std::vector<Param>& params,
                                                  std::string_view what,
                                                  std::chrono::milliseconds within);
  /// Prepares `sql` as statement `name`.
  [[nodiscard]] absl::Status Prepare(const char* name, std::string_view sql);

  /// The status for a failed `result` (null: the connection's own error)
  /// while doing `what`: Aborted for a fencing refusal (SQLSTATE CF001),
  /// Unavailable for a lost connection, Internal for the rest.
  [[nodiscard]] absl::Status Error(const PGresult* result, std::string_view what) const;

 private:
  Connection(PGconn* conn, std::string where) : conn_(conn), where_(std::move(where)) {}
  PGconn* conn_ = nullptr;
  std::string where_;
};

/// The parameter arrays libpq takes, pointing into `params`.
struct ParamArrays {
  explicit ParamArrays(const std::vector<Param>& params);
  std::vector<const char*> values;
  std::vector<int> lengths;
  std::vector<int> formats;
  [[nodiscard]] int Count() const { return static_cast<int>(values.size()); }
};

/// A column of a row as text, or its bytes in a binary result.
[[nodiscard]] std::string_view Value(const PGresult* result, int row, int column);
[[nodiscard]] long long IntValue(const PGresult* result, int row, int column);

/// The SQLSTATE the fencing check raises when another controller took over.
inline constexpr std::string_view kFencedState = "CF001";

}  // namespace cohort::controller::pg
