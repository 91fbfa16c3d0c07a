// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string_view>

#include <fmt/format.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

/// Lets fmt print absl's string_view (Debian builds absl with its own
/// string_view type) and absl::Status.

template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<std::string_view> {
  template <typename Context>
  auto format(absl::string_view text, Context& context) const {
    return fmt::formatter<std::string_view>::format(std::string_view(text.data(), text.size()),
                                                    context);
  }
};

template <>
struct fmt::formatter<absl::Status> : fmt::formatter<std::string_view> {
  template <typename Context>
  auto format(const absl::Status& status, Context& context) const {
    const absl::string_view message = status.message();
    return fmt::formatter<std::string_view>::format(
        std::string_view(message.data(), message.size()), context);
  }
};
