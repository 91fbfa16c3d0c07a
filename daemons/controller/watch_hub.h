// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <map>
#include <set>

#include "cohort/engine/engine.h"
#include "cohort/v1/cohort.pb.h"
#include "outbox.h"
#include "worker.h"

namespace cohort::controller {

/// A client waiting for changes of one job (WatchJob).
class JobWatcher {
 public:
  virtual ~JobWatcher() = default;
  /// Sends one event; `last` ends the stream after it.
  enum class Last : std::uint8_t { kNo, kYes };
  virtual void Push(v1::JobEvent event, Last last) = 0;
};

/// The watchers of jobs, and the fan-out of each job's changes to them.
/// Every event goes through the outbox: a watcher never hears of a change
/// before it is durable. A job's last event (its final state) ends its
/// watchers' streams. Watchers are registered and forgotten only on the
/// state thread, and every call here is made there.
class WatchHub {
 public:
  explicit WatchHub(Outbox& outbox) : outbox_(outbox) {}

  /// Registers `watcher` for job `id` and sends it `current` (the job now)
  /// once durable, answering `reply` just before; `last` kYes when the job
  /// has already finished (the stream ends after `current`). Nothing is
  /// sent to a watcher forgotten meanwhile.
  void Watch(JobId id, JobWatcher* watcher, v1::JobEvent current, JobWatcher::Last last,
             Reply<bool> reply);
  /// Forgets `watcher`: nothing more is pushed to it.
  void Unwatch(JobWatcher* watcher);
  /// Whether job `id` has watchers (an event is worth building).
  [[nodiscard]] bool Watched(JobId id) const { return watchers_.contains(id); }
  /// Sends `event` to job `id`'s watchers once durable; with `last` kYes it
  /// is their last, and they are forgotten for this job.
  void Publish(JobId id, v1::JobEvent event, JobWatcher::Last last);

 private:
  [[nodiscard]] bool Registered(JobId id, JobWatcher* watcher) const;

  Outbox& outbox_;
  std::multimap<JobId, JobWatcher*> watchers_;
  /// Watchers of jobs that just finished: their last event is on its way.
  std::set<JobWatcher*> finished_watchers_;
};

}  // namespace cohort::controller
