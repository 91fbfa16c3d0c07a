// SPDX-License-Identifier: Apache-2.0
#include "cohort/alloc/channel_pool.h"

#include <algorithm>

#include "cohort/check.h"

namespace cohort::alloc {

ChannelPool::ChannelPool(int count)
    : held_(static_cast<std::size_t>(std::max(count, 0)), 0), free_(std::max(count, 0)) {}

bool ChannelPool::Held(int channel) const {
  return channel >= 0 && channel < Count() && held_[static_cast<std::size_t>(channel)] != 0;
}

std::optional<int> ChannelPool::Take() {
  if (free_ == 0) return std::nullopt;
  while (held_[static_cast<std::size_t>(next_)] != 0) ++next_;
  held_[static_cast<std::size_t>(next_)] = 1;
  --free_;
  return next_++;
}

void ChannelPool::Give(int channel) {
  COHORT_CHECK(Held(channel), "a channel that is not held was given back");
  held_[static_cast<std::size_t>(channel)] = 0;
  ++free_;
  next_ = std::min(next_, channel);
}

bool ChannelPool::Restore(int channel) {
  if (channel < 0 || channel >= Count() || Held(channel)) return false;
  held_[static_cast<std::size_t>(channel)] = 1;
  --free_;
  return true;
}

}  // namespace cohort::alloc
