// SPDX-License-Identifier: Apache-2.0
#include "image_pull.h"

#include <fmt/format.h>

#include <filesystem>
#include <system_error>

#include <nlohmann/json.hpp>

namespace cohort::step {

std::vector<std::string> ImagePullCommand(const std::string& program, const ImageStore& store,
                                          const std::string& reference,
                                          std::optional<std::uint32_t> owner) {
  std::vector<std::string> argv = {program, "pull", "--cache", store.cache_dir};
  if (!store.registry_ca_file.empty()) {
    argv.insert(argv.end(), {"--ca-file", store.registry_ca_file});
  }
  for (const std::string& mirror : store.registry_mirrors) {
    argv.insert(argv.end(), {"--mirror", mirror});
  }
  if (store.cache_max_bytes > 0) {
    argv.insert(argv.end(), {"--max-cache-bytes", std::to_string(store.cache_max_bytes)});
  }
  if (!store.credentials_file.empty()) {
    argv.insert(argv.end(), {"--credentials", store.credentials_file});
  }
  if (owner) argv.insert(argv.end(), {"--owner", std::to_string(*owner)});
  // After "--": a reference is never taken for an option.
  argv.insert(argv.end(), {"--", reference});
  return argv;
}

std::string_view LastLine(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  const std::size_t newline = text.rfind('\n');
  return newline == std::string_view::npos ? text : text.substr(newline + 1);
}

std::string ImagePullComplaint(std::string_view stderr_text, std::string_view reference,
                               int wait_status) {
  std::string_view why = LastLine(stderr_text);
  // cohort-image names the image itself: "cohort-image: REF: why".
  constexpr std::string_view kPrefix = "cohort-image: ";
  if (why.starts_with(kPrefix)) why.remove_prefix(kPrefix.size());
  if (!why.empty()) return std::string(why);
  return fmt::format("image {:?}: cohort-image ended with status {}", reference, wait_status);
}

absl::StatusOr<ImageInfo> ParseImageInfo(std::string_view json) {
  try {
    const nlohmann::json parsed = nlohmann::json::parse(json);
    ImageInfo info;
    info.digest = parsed.at("digest").get<std::string>();
    info.rootfs = parsed.at("rootfs").get<std::string>();
    info.env = parsed.value("env", std::vector<std::string>());
    info.working_dir = parsed.value("working_dir", std::string());
    info.entrypoint = parsed.value("entrypoint", std::vector<std::string>());
    info.cached = parsed.value("cached", false);
    info.bytes = parsed.value("bytes", std::int64_t{0});
    if (!info.rootfs.starts_with('/')) {
      return absl::InvalidArgumentError("cohort-image gave a rootfs that is not absolute");
    }
    return info;
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        fmt::format("cohort-image printed no image description ({})", e.what()));
  }
}

std::string ImageProgram() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return "cohort-image";
  return (self.parent_path() / "cohort-image").string();
}

}  // namespace cohort::step
