// SPDX-License-Identifier: Apache-2.0
#include "manifest.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <utility>

#include "absl/status/status.h"
#include "sha256.h"

namespace cohort::image {
namespace {

using nlohmann::json;

absl::StatusOr<json> ParseJson(std::string_view body, std::string_view what) {
  json document = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded() || !document.is_object()) {
    return absl::InvalidArgumentError(fmt::format("the {} is not a JSON object", what));
  }
  return document;
}

std::string StringField(const json& object, const char* name) {
  const auto it = object.find(name);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::vector<std::string> StringList(const json& object, const char* name) {
  std::vector<std::string> list;
  const auto it = object.find(name);
  if (it == object.end() || !it->is_array()) return list;
  for (const json& item : *it) {
    if (item.is_string()) list.push_back(item.get<std::string>());
  }
  return list;
}

absl::StatusOr<Descriptor> ParseDescriptor(const json& item, std::string_view what,
                                           std::int64_t max_bytes) {
  if (!item.is_object()) {
    return absl::InvalidArgumentError(fmt::format("the manifest's {} is not an object", what));
  }
  Descriptor descriptor;
  descriptor.media_type = StringField(item, "mediaType");
  descriptor.digest = StringField(item, "digest");
  if (!IsSha256Digest(descriptor.digest)) {
    return absl::InvalidArgumentError(
        fmt::format("the manifest's {} has digest \"{}\"; only sha256 digests are supported", what,
                    descriptor.digest.substr(0, 80)));
  }
  const auto size = item.find("size");
  if (size == item.end() || !size->is_number_integer() || size->get<std::int64_t>() < 0) {
    return absl::InvalidArgumentError(
        fmt::format("the manifest's {} {} has no valid size", what, descriptor.digest));
  }
  descriptor.size = size->get<std::int64_t>();
  if (descriptor.size > max_bytes) {
    return absl::InvalidArgumentError(
        fmt::format("the manifest's {} {} is {} bytes, over the limit of {}", what,
                    descriptor.digest, descriptor.size, max_bytes));
  }
  if (const auto platform = item.find("platform");
      platform != item.end() && platform->is_object()) {
    descriptor.platform.os = StringField(*platform, "os");
    descriptor.platform.architecture = StringField(*platform, "architecture");
    descriptor.platform.variant = StringField(*platform, "variant");
  }
  return descriptor;
}

}  // namespace

absl::StatusOr<Manifest> ParseManifest(std::string_view media_type, std::string_view body,
                                       std::int64_t max_layer_bytes) {
  if (static_cast<std::int64_t>(body.size()) > kMaxManifestBytes) {
    return absl::InvalidArgumentError(fmt::format("the manifest is {} bytes, over the limit of {}",
                                                  body.size(), kMaxManifestBytes));
  }
  absl::StatusOr<json> document = ParseJson(body, "manifest");
  if (!document.ok()) return document.status();
  std::string type(media_type.substr(0, media_type.find(';')));
  while (!type.empty() && type.back() == ' ') type.pop_back();
  if (type.empty() || type == "application/json" || type == "text/plain" ||
      type == "application/octet-stream") {
    type = StringField(*document, "mediaType");
    // An OCI manifest or index may leave mediaType out; its fields tell.
    if (type.empty()) type = document->contains("manifests") ? kOciIndex : kOciManifest;
  }
  Manifest manifest;
  if (type == kOciIndex || type == kDockerList) {
    manifest.is_index = true;
    const auto entries = document->find("manifests");
    if (entries == document->end() || !entries->is_array()) {
      return absl::InvalidArgumentError("the index has no list of manifests");
    }
    if (entries->size() > 1024) {
      return absl::InvalidArgumentError(
          fmt::format("the index lists {} manifests, over the limit of 1024", entries->size()));
    }
    for (const json& entry : *entries) {
      absl::StatusOr<Descriptor> descriptor = ParseDescriptor(entry, "entry", kMaxManifestBytes);
      if (!descriptor.ok()) return descriptor.status();
      manifest.manifests.push_back(*std::move(descriptor));
    }
    return manifest;
  }
  if (type != kOciManifest && type != kDockerManifest) {
    return absl::UnimplementedError(fmt::format(
        "unsupported media type \"{}\" for a manifest; only OCI and Docker schema 2 images can "
        "be pulled",
        type.substr(0, 120)));
  }
  const auto config = document->find("config");
  if (config == document->end()) return absl::InvalidArgumentError("the manifest has no config");
  absl::StatusOr<Descriptor> config_descriptor =
      ParseDescriptor(*config, "config", kMaxManifestBytes);
  if (!config_descriptor.ok()) return config_descriptor.status();
  manifest.config = *std::move(config_descriptor);
  const auto layers = document->find("layers");
  if (layers == document->end() || !layers->is_array()) {
    return absl::InvalidArgumentError("the manifest has no list of layers");
  }
  if (layers->size() > static_cast<std::size_t>(kMaxLayers)) {
    return absl::InvalidArgumentError(
        fmt::format("the image has {} layers, over the limit of {}", layers->size(), kMaxLayers));
  }
  for (const json& layer : *layers) {
    absl::StatusOr<Descriptor> descriptor = ParseDescriptor(layer, "layer", max_layer_bytes);
    if (!descriptor.ok()) return descriptor.status();
    manifest.layers.push_back(*std::move(descriptor));
  }
  return manifest;
}

absl::StatusOr<ImageConfig> ParseImageConfig(std::string_view body) {
  absl::StatusOr<json> document = ParseJson(body, "image config");
  if (!document.ok()) return document.status();
  ImageConfig config;
  config.platform.os = StringField(*document, "os");
  config.platform.architecture = StringField(*document, "architecture");
  config.platform.variant = StringField(*document, "variant");
  if (const auto run = document->find("config"); run != document->end() && run->is_object()) {
    config.env = StringList(*run, "Env");
    config.entrypoint = StringList(*run, "Entrypoint");
    config.cmd = StringList(*run, "Cmd");
    config.working_dir = StringField(*run, "WorkingDir");
    config.user = StringField(*run, "User");
  }
  if (const auto rootfs = document->find("rootfs");
      rootfs != document->end() && rootfs->is_object()) {
    if (const auto ids = rootfs->find("diff_ids"); ids != rootfs->end() && ids->is_array()) {
      config.diff_ids = static_cast<int>(ids->size());
    }
  }
  return config;
}

bool IsImageConfigType(std::string_view media_type) {
  return media_type == "application/vnd.oci.image.config.v1+json" ||
         media_type == "application/vnd.docker.container.image.v1+json";
}

absl::StatusOr<Platform> ParsePlatform(std::string_view text) {
  Platform platform;
  const std::size_t first = text.find('/');
  if (first == std::string_view::npos || first == 0) {
    return absl::InvalidArgumentError(fmt::format(
        "platform \"{}\" must be OS/ARCH[/VARIANT], e.g. linux/amd64 or linux/arm64/v8", text));
  }
  platform.os = std::string(text.substr(0, first));
  std::string_view rest = text.substr(first + 1);
  const std::size_t second = rest.find('/');
  platform.architecture = std::string(rest.substr(0, second));
  if (second != std::string_view::npos) platform.variant = std::string(rest.substr(second + 1));
  bool good = !platform.architecture.empty() &&
              (second == std::string_view::npos || !platform.variant.empty());
  for (const std::string* part : {&platform.os, &platform.architecture, &platform.variant}) {
    for (const char c : *part) {
      good = good && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-');
    }
  }
  if (!good) {
    return absl::InvalidArgumentError(
        fmt::format("platform \"{}\" must be OS/ARCH[/VARIANT] in lowercase, e.g. linux/amd64 or "
                    "linux/arm64/v8",
                    text));
  }
  return platform;
}

std::string FormatPlatform(const Platform& platform) {
  if (platform.variant.empty()) return fmt::format("{}/{}", platform.os, platform.architecture);
  return fmt::format("{}/{}/{}", platform.os, platform.architecture, platform.variant);
}

Platform LinuxPlatform(std::string_view machine) {
  Platform platform{.os = "linux", .architecture = std::string(machine), .variant = {}};
  if (machine == "x86_64") platform.architecture = "amd64";
  if (machine == "aarch64" || machine == "arm64") platform.architecture = "arm64";
  if (machine == "i386" || machine == "i686") platform.architecture = "386";
  if (machine == "armv7l") platform = {.os = "linux", .architecture = "arm", .variant = "v7"};
  if (machine == "ppc64le" || machine == "s390x" || machine == "riscv64") {
    platform.architecture = std::string(machine);
  }
  return platform;
}

absl::StatusOr<Descriptor> ChoosePlatform(const Manifest& index, const Platform& platform) {
  std::string offered;
  for (const Descriptor& entry : index.manifests) {
    if (entry.platform.os == platform.os && entry.platform.architecture == platform.architecture &&
        (platform.variant.empty() || entry.platform.variant == platform.variant)) {
      return entry;
    }
    if (!entry.platform.os.empty() && entry.platform.os != "unknown") {
      offered += offered.empty() ? "" : ", ";
      offered += FormatPlatform(entry.platform);
    }
  }
  return absl::NotFoundError(fmt::format(
      "the image has no manifest for {} (it has {}); pass --platform with one of those",
      FormatPlatform(platform), offered.empty() ? std::string("none with a platform") : offered));
}

}  // namespace cohort::image
