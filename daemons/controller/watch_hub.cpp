// SPDX-License-Identifier: Apache-2.0
#include "watch_hub.h"

#include <algorithm>
#include <vector>

namespace cohort::controller {

bool WatchHub::Registered(JobId id, JobWatcher* watcher) const {
  const auto [lo, hi] = watchers_.equal_range(id);
  return std::any_of(lo, hi, [&](const auto& e) { return e.second == watcher; }) ||
         finished_watchers_.contains(watcher);
}

void WatchHub::Watch(JobId id, JobWatcher* watcher, v1::JobEvent current, JobWatcher::Last last,
                     Reply<bool> reply) {
  const bool finished = last == JobWatcher::Last::kYes;
  if (finished) {
    finished_watchers_.insert(watcher);
  } else {
    watchers_.emplace(id, watcher);
  }
  outbox_.Defer(
      [this, id, reply = std::move(reply), watcher, event = std::move(current), last]() mutable {
        // The client may have gone (and its watcher with it) meanwhile.
        if (!Registered(id, watcher)) return;
        if (last == JobWatcher::Last::kYes) finished_watchers_.erase(watcher);
        reply(true);
        watcher->Push(std::move(event), last);
      });
}

void WatchHub::Unwatch(JobWatcher* watcher) {
  std::erase_if(watchers_, [watcher](const auto& entry) { return entry.second == watcher; });
  finished_watchers_.erase(watcher);
}

void WatchHub::Publish(JobId id, v1::JobEvent event, JobWatcher::Last last) {
  auto [first, end] = watchers_.equal_range(id);
  if (first == end) return;
  std::vector<JobWatcher*> watchers;
  for (auto it = first; it != end; ++it) watchers.push_back(it->second);
  if (last == JobWatcher::Last::kYes) {
    // Their last event is on its way: later ones of this job are not theirs.
    finished_watchers_.insert(watchers.begin(), watchers.end());
    watchers_.erase(id);
  }
  // Watchers are forgotten (and deleted) only on this thread, after
  // Unwatch; a deferred push checks the watcher is still registered.
  outbox_.Defer([this, id, event = std::move(event), watchers = std::move(watchers), last] {
    for (JobWatcher* watcher : watchers) {
      if (Registered(id, watcher)) watcher->Push(event, last);
    }
    if (last == JobWatcher::Last::kYes) {
      for (JobWatcher* watcher : watchers) finished_watchers_.erase(watcher);
    }
  });
}

}  // namespace cohort::controller
