// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "store/store.h"

/// The state in PostgreSQL (StateBackend=postgresql): the same records as
/// SQLite's, in the schema `cohort` (documented for operators' own queries
/// in docs/operations.md), which several controllers share. Commits of the
/// active controller carry its fencing epoch (pg_leader.h): once another
/// controller took over, every commit of the old one is refused.
namespace cohort::controller {

/// The PostgreSQL schema this build writes; older ones are migrated on
/// open, a newer one is refused.
inline constexpr int kPgSchemaVersion = 6;

/// Opens a connection to the database `conninfo` names. kWrite creates and
/// migrates the schema (serialized between controllers by an advisory
/// lock); kRead needs it current. A writer with `epoch` > 0 checks it in
/// every commit (Aborted when another controller holds the lease now).
[[nodiscard]] absl::StatusOr<std::unique_ptr<Store>> OpenPostgresStore(const std::string& conninfo,
                                                                       Store::Mode mode,
                                                                       StateSync sync,
                                                                       std::int64_t epoch);

/// The SQL of each PostgreSQL schema version, as Store::Migrations.
[[nodiscard]] const std::vector<std::string>& PostgresMigrations();

}  // namespace cohort::controller
