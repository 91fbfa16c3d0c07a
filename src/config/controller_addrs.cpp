// SPDX-License-Identifier: Apache-2.0
#include "cohort/config/controller_addrs.h"

#include <charconv>

#include <fmt/format.h>

#include "config/conf_lexer.h"

namespace cohort::config {
namespace {

constexpr std::string_view kNotActive = "not the active controller; ";
constexpr std::string_view kActiveIs = "the active one is ";
constexpr std::string_view kNoneActive = "no controller is active yet, try again in a few seconds";

bool IsPort(std::string_view text) {
  int number = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  return !text.empty() && error == std::errc() && end == text.data() + text.size() && number >= 1 &&
         number <= 65535;
}

}  // namespace

std::vector<std::string> SplitEntries(std::string_view text) {
  std::vector<std::string> out;
  for (std::string entry : conf::SplitCommas(text)) {
    const std::size_t first = entry.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    entry = entry.substr(first, entry.find_last_not_of(" \t") - first + 1);
    out.push_back(std::move(entry));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> ParseControllerList(std::string_view text,
                                                             int default_port,
                                                             std::string_view source) {
  std::vector<std::string> out;
  const auto invalid = [&](std::string_view entry, std::string_view why) {
    return absl::InvalidArgumentError(fmt::format(
        "{} entry \"{}\": {}; write HOST:PORT, [IPV6]:PORT or unix:/PATH, several separated by "
        "commas (such as ctl1:6820,ctl2:6820)",
        source, entry, why));
  };
  for (const std::string& entry : SplitEntries(text)) {
    if (entry.starts_with("unix:")) {
      if (entry.size() == 5) return invalid(entry, "the socket path is missing");
      out.push_back(entry);
      continue;
    }
    if (entry.starts_with("dns:") || entry.starts_with("ipv4:") || entry.starts_with("ipv6:")) {
      out.push_back(entry);
      continue;
    }
    std::string_view host = entry;
    std::string_view port;
    if (entry.starts_with('[')) {
      const std::size_t close = entry.find(']');
      if (close == std::string::npos) return invalid(entry, "the IPv6 address has no ']'");
      host = std::string_view(entry).substr(0, close + 1);
      const std::string_view rest = std::string_view(entry).substr(close + 1);
      if (!rest.empty() && !rest.starts_with(':')) {
        return invalid(entry, "only :PORT may follow the IPv6 address");
      }
      if (!rest.empty()) port = rest.substr(1);
    } else if (const std::size_t colon = entry.rfind(':'); colon != std::string::npos) {
      host = std::string_view(entry).substr(0, colon);
      port = std::string_view(entry).substr(colon + 1);
      if (host.find(':') != std::string_view::npos) {
        return invalid(entry, "an IPv6 address needs brackets, as [::1]:6820");
      }
    }
    if (host.empty() || host == "[]") return invalid(entry, "the host is missing");
    if (!port.empty() && !IsPort(port)) {
      return invalid(entry, fmt::format("port \"{}\" is not a number from 1 to 65535", port));
    }
    if (port.empty() && entry.find(':') != std::string::npos && !entry.starts_with('[')) {
      return invalid(entry, "the port after ':' is missing");
    }
    if (port.empty() && default_port < 1) return invalid(entry, "the port is missing");
    out.push_back(port.empty() ? fmt::format("{}:{}", host, default_port) : entry);
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("{} is empty; name the controller as HOST:PORT or unix:/PATH", source));
  }
  return out;
}

std::vector<std::string> ControllerTargets(const ClusterConfig& config) {
  std::vector<std::string> out;
  for (const std::string& entry : config.controller_addrs) {
    absl::StatusOr<std::vector<std::string>> one =
        ParseControllerList(entry, config.controller_port, "ControllerAddr");
    if (one.ok()) out.insert(out.end(), one->begin(), one->end());
  }
  if (out.empty()) {
    const std::string& host = config.controller_addr;
    out.push_back(host.find(':') != std::string::npos && !host.starts_with('[')
                      ? fmt::format("[{}]:{}", host, config.controller_port)
                      : fmt::format("{}:{}", host, config.controller_port));
  }
  return out;
}

std::string_view HostOf(std::string_view target) {
  if (target.starts_with("unix:")) return {};
  if (target.starts_with('[')) return target.substr(0, target.find(']') + 1);
  return target.substr(0, target.rfind(':'));
}

std::string NotActiveMessage(std::string_view active) {
  return active.empty() ? fmt::format("{}{}", kNotActive, kNoneActive)
                        : fmt::format("{}{}{}", kNotActive, kActiveIs, active);
}

bool IsNotActive(std::string_view message) { return message.starts_with(kNotActive); }

std::optional<std::string> ActiveFromMessage(std::string_view message) {
  if (!IsNotActive(message)) return std::nullopt;
  message.remove_prefix(kNotActive.size());
  if (!message.starts_with(kActiveIs)) return std::nullopt;
  message.remove_prefix(kActiveIs.size());
  if (message.empty()) return std::nullopt;
  return std::string(message);
}

}  // namespace cohort::config
