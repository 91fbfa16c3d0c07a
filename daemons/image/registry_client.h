// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <curl/curl.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "blob_source.h"
#include "cohort/container/image_ref.h"
#include "credentials.h"

/// A client of the OCI distribution API (libcurl): pulls one repository's
/// manifests and blobs over HTTPS, logging in as the registry asks.
namespace cohort::image {

/// How to reach a registry.
struct RegistryOptions {
  std::string ca_file;                  ///< PEM bundle for the registry's TLS; empty: the system's
  std::vector<Credential> credentials;  ///< logins (credentials.h)
  std::string credentials_path;         ///< where they came from, for messages; empty: none given
  /// Base URLs (http:// or https://) of mirrors of this registry, tried
  /// first for each request; the registry itself is the last resort.
  std::vector<std::string> mirrors;
  std::int64_t max_rate = 0;  ///< bytes per second a download may take; 0: no cap
};

/// One repository of one registry. `/v2/` tells how to log in: nothing,
/// `Basic` (the credentials' login for the registry's host), or `Bearer`
/// (a token from the realm, asked for with that login when there is one,
/// anonymously otherwise). Blob redirects are followed by hand, dropping the
/// Authorization header when they leave the registry's origin. Connecting
/// gives up after 30 s and a transfer below 1 KiB/s for 60 s is aborted.
/// Errors quote the registry (HTTP status, its errors[].code and message),
/// curl or the system, and say what to do. Not thread-safe.
class RegistryClient final : public BlobSource {
 public:
  RegistryClient(container::ImageRef ref, RegistryOptions options);
  ~RegistryClient() override;
  RegistryClient(const RegistryClient&) = delete;
  RegistryClient& operator=(const RegistryClient&) = delete;

  [[nodiscard]] absl::StatusOr<FetchedManifest> FetchManifest(std::string_view reference) override;
  [[nodiscard]] absl::Status FetchBlob(const Descriptor& blob, std::string_view kind,
                                       const std::string& path) override;

 private:
  struct Endpoint {
    std::string base;  ///< scheme://host[:port]
    std::string host;  ///< host[:port], for credentials
    bool mirror = false;
    bool ready = false;           ///< its login is settled
    bool broken = false;          ///< a mirror that failed: skipped from then on
    std::string authorization{};  ///< the Authorization header's value; empty: none
    std::string login{};          ///< whose login the header carries; empty: anonymous
  };
  struct Response {
    long status = 0;
    std::string reason;
    std::vector<std::pair<std::string, std::string>> headers;  ///< names lowercased
    std::string error_body;                                    ///< a non-2xx answer's body (capped)
    std::string curl_error;                                    ///< empty: the transfer completed
    [[nodiscard]] std::string Header(std::string_view name) const;
  };
  using Sink = std::function<bool(std::string_view)>;

  absl::StatusOr<Response> Get(const Endpoint& endpoint, const std::string& path,
                               std::string_view accept, const Sink& sink);
  Response Perform(const std::string& url, const std::string& authorization,
                   std::string_view accept, bool trusted, const Sink& sink);
  absl::Status Prepare(Endpoint& endpoint);
  absl::Status Token(Endpoint& endpoint, std::string_view challenge);
  absl::Status Refusal(const Endpoint& endpoint, const Response& response,
                       std::string_view what) const;
  std::string NoLoginHint(const Endpoint& endpoint) const;
  template <typename Attempt>
  absl::Status OnEachEndpoint(const Attempt& attempt);

  container::ImageRef ref_;
  RegistryOptions options_;
  std::vector<Endpoint> endpoints_;  ///< mirrors first, the registry last
  CURL* curl_;
};

/// The cause of an HTTP error as the registry words it:
/// `404 MANIFEST_UNKNOWN: manifest unknown` from its JSON errors, or
/// `404 Not Found` without them. Pure.
[[nodiscard]] std::string RegistryCause(long status, std::string_view reason,
                                        std::string_view body);

}  // namespace cohort::image
