// SPDX-License-Identifier: Apache-2.0
#include "image_command.h"

#include <curl/curl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/container/image_ref.h"
#include "cohort/fmt_absl.h"
#include "image_puller.h"
#include "run_as.h"

namespace cohort::image {
namespace {

struct PullCommand {
  std::string reference;
  std::string cache;
  std::string ca_file;
  std::string credentials;
  std::int64_t credentials_uid = -1;
  std::int64_t owner = -1;
  std::int64_t max_cache_bytes = 0;
  std::vector<std::string> mirrors;
  std::string platform;
  std::int64_t limit_rate = 0;
};

// The owner's ~/.config/enroot/.credentials when it exists.
std::optional<std::string> OwnCredentialsFile(uid_t owner) {
  absl::StatusOr<step::Account> account = step::LookupAccount(owner, "this node");
  if (!account.ok() || !account->home.starts_with('/')) return std::nullopt;
  std::string path = account->home + "/.config/enroot/.credentials";
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return std::nullopt;
  return path;
}

int UsageError(const std::string& message) {
  std::fputs(fmt::format("cohort-image: {}\n", message).c_str(), stderr);
  return kExitUsage;
}

int Pull(const PullCommand& command) {
  absl::StatusOr<container::ImageSource> source = container::ParseImageReference(command.reference);
  if (!source.ok()) return UsageError(fmt::format("{}", source.status()));
  PullOptions options;
  options.cache_dir = command.cache;
  options.ca_file = command.ca_file;
  options.credentials_path = command.credentials;
  if (command.credentials_uid >= 0) {
    options.credentials_uid = static_cast<uid_t>(command.credentials_uid);
  }
  // enroot's place for a user's own registry logins, read as the user;
  // without one, --credentials (the node's) as given.
  if (command.owner >= 0) {
    options.owner = static_cast<uid_t>(command.owner);
    if (std::optional<std::string> own = OwnCredentialsFile(static_cast<uid_t>(command.owner))) {
      options.credentials_path = *std::move(own);
      options.credentials_uid = static_cast<uid_t>(command.owner);
    }
  }
  options.max_cache_bytes = command.max_cache_bytes;
  options.limit_rate = command.limit_rate;
  for (const std::string& mirror : command.mirrors) {
    const std::size_t equals = mirror.find('=');
    const std::string url = equals == std::string::npos ? std::string() : mirror.substr(equals + 1);
    if (equals == 0 || (!url.starts_with("http://") && !url.starts_with("https://"))) {
      return UsageError(
          fmt::format("--mirror \"{}\" must be REGISTRY=URL with an http:// or https:// URL, e.g. "
                      "nvcr.io=http://mirror.example:5000",
                      mirror));
    }
    options.mirrors[mirror.substr(0, equals)].push_back(url);
  }
  if (command.platform.empty()) {
    utsname name{};
    ::uname(&name);
    options.platform = LinuxPlatform(name.machine);
  } else {
    absl::StatusOr<Platform> platform = ParsePlatform(command.platform);
    if (!platform.ok()) return UsageError(fmt::format("--platform: {}", platform.status()));
    options.platform = *platform;
  }
  absl::StatusOr<PulledImage> image = PullImage(*source, options);
  if (!image.ok()) {
    std::fputs(
        fmt::format("cohort-image: {}: {}\n", DisplayReference(*source), image.status()).c_str(),
        stderr);
    return kExitImageError;
  }
  std::fputs((PulledImageToJson(*image) + "\n").c_str(), stdout);
  return std::fflush(stdout) == 0 ? 0 : kExitImageError;
}

}  // namespace

int RunImageCommand(int argc, char** argv) {
  CLI::App app{
      "cohort-image: brings container images into a node's image cache for cohort-stepd and "
      "cohort-agent, and says where their root filesystem is.",
      "cohort-image"};
  app.set_version_flag("--version", "cohort-image 0.1.0");
  app.require_subcommand(1);
  PullCommand command;
  CLI::App* pull = app.add_subcommand(
      "pull",
      "Pull REFERENCE into the cache (or find it there) and print one JSON object: reference, "
      "digest, rootfs, env, working_dir, entrypoint, cmd, user, bytes, cached. Exit 1 when the "
      "image cannot be pulled, 2 for a wrong command line.");
  pull->add_option("reference", command.reference,
                   "[USER@][REGISTRY#]IMAGE[:TAG|@DIGEST] (e.g. nvcr.io#nvidia/pytorch:24.07-py3), "
                   "docker://[USER@][REGISTRY/]IMAGE[:TAG], PATH.sqsh, oci:DIR or "
                   "oci-archive:FILE.tar")
      ->required();
  pull->add_option("--cache", command.cache, "the node's image cache folder (created, 0755)")
      ->required();
  pull->add_option("--ca-file", command.ca_file,
                   "PEM file of CA certificates for the registries' TLS (default: the system's)")
      ->check(CLI::ExistingFile);
  pull->add_option("--credentials", command.credentials,
                   "enroot's credentials file: `machine HOST login USER password PASS` entries");
  pull->add_option("--credentials-uid", command.credentials_uid,
                   "read the credentials file as this user (the job's owner)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{4294967294}));
  pull->add_option("--owner", command.owner,
                   "the job's owner: their own logins in ~/.config/enroot/.credentials, read as "
                   "them, when they keep that file, else --credentials; a squashfs file or OCI "
                   "layout is opened as them")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{4294967294}));
  pull->add_option("--max-cache-bytes", command.max_cache_bytes,
                   "after the pull, evict least recently used images not in use until the cache "
                   "takes at most this many bytes (0: no bound)")
      ->check(CLI::NonNegativeNumber);
  pull->add_option("--mirror", command.mirrors,
                   "REGISTRY=URL: try this mirror of REGISTRY first (repeatable)");
  pull->add_option("--platform", command.platform,
                   "OS/ARCH[/VARIANT] to take from a multi-platform image (default: linux and "
                   "this machine's architecture)");
  pull->add_option("--limit-rate", command.limit_rate,
                   "download at most this many bytes per second (0: no cap)")
      ->check(CLI::NonNegativeNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? 0 : kExitUsage;
  }
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    std::fputs("cohort-image: libcurl could not start\n", stderr);
    return kExitImageError;
  }
  const int status = Pull(command);
  curl_global_cleanup();
  return status;
}

}  // namespace cohort::image
