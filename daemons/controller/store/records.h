// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "absl/status/statusor.h"
#include "cohort/engine/engine.h"
#include "cohort/v1/cohort.pb.h"
#include "cohort/v1/state.pb.h"
#include "controller_state.h"
#include "outbox.h"
#include "store/account_records.h"

/// Jobs to and from their durable records.
namespace cohort::controller {

/// The record of `job`; `spec` is what was submitted, without the
/// environment (the store keeps that apart).
[[nodiscard]] v1::JobRecord ToRecord(const Job& job, const v1::JobSpec& spec,
                                     const topology::Topology& topology);

/// The engine's job from a record (of this version: see ParseJobRecord),
/// with the status it was saved in. Nodes no longer in the topology become
/// grants on topology::kNone, which Engine::Restore treats as lost.
/// InvalidArgument when the record's request no longer parses.
[[nodiscard]] absl::StatusOr<SavedJob> FromRecord(const v1::JobRecord& record,
                                                  const topology::Topology& topology);

/// GPU-hours a job has held: each node's GPUs × the time from start to end
/// (or `now` while it runs).
[[nodiscard]] double GpuHours(const v1::JobRecord& record, std::int64_t now_ms);

/// What clients see of a job that only the store still has.
void RecordToWire(const v1::JobRecord& record, const topology::Topology& topology, v1::Job* out);

/// The records the outbox writes, made from the controller's state: jobs
/// as the engine holds them with their specs as submitted. State thread.
class StateRecords final : public RecordSource {
 public:
  explicit StateRecords(ControllerState& state) : state_(state) {}
  bool JobRow(JobId id, WithEnv with_env, StateBatch::JobRow& row) override;
  [[nodiscard]] NodeAdmin Admin(NodeId node) const override { return state_.engine.Admin(node); }
  [[nodiscard]] std::string NodeName(NodeId node) const override {
    return state_.topology->NodeName(node);
  }
  [[nodiscard]] std::vector<PartitionAdmin> PartitionOverrides() const override {
    return state_.engine.PartitionOverrides();
  }
  [[nodiscard]] JobId NextId() const override { return state_.engine.NextId(); }
  [[nodiscard]] std::vector<policy::UsageRecord> Usage(Millis now) const override {
    return state_.engine.Usage().Snapshot(now);
  }
  [[nodiscard]] v1::AccountingRecord Accounting() const override {
    return ToRecord(state_.engine.Accounting());
  }
  [[nodiscard]] std::vector<v1::Reservation> Reservations() const override;

 private:
  ControllerState& state_;
};

}  // namespace cohort::controller
