// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

/// Numbered channels, each held by at most one job at a time: NVIDIA IMEX
/// channels (SwitchType=switch/nvidia_imex), one per job or per segment.
namespace cohort::alloc {

class ChannelPool {
 public:
  /// Channels 0 .. count-1 (none when count is 0).
  explicit ChannelPool(int count = 0);

  [[nodiscard]] int Count() const { return static_cast<int>(held_.size()); }
  [[nodiscard]] int FreeCount() const { return free_; }
  [[nodiscard]] bool Held(int channel) const;

  /// The lowest free channel, now held; nullopt when none is free.
  [[nodiscard]] std::optional<int> Take();
  /// Frees a held channel. Check-fails on one that is not held: that would
  /// let two jobs share it.
  void Give(int channel);
  /// Holds `channel` again (a running job's, after a restart). False, and
  /// nothing held, when it is out of range or already held.
  [[nodiscard]] bool Restore(int channel);

 private:
  std::vector<std::uint8_t> held_;
  int free_ = 0;
  int next_ = 0;  ///< no channel below it is free
};

}  // namespace cohort::alloc
