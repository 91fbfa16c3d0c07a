// SPDX-License-Identifier: Apache-2.0
#include "registry_client.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/status/status.h"
#include "blob_file.h"
#include "cohort/fmt_absl.h"
#include "sha256.h"

namespace cohort::image {
namespace {

constexpr long kConnectTimeoutSeconds = 30;
// A transfer slower than this for this long is dead (a registry that stopped
// sending without closing the connection).
constexpr long kLowSpeedBytes = 1024;
constexpr long kLowSpeedSeconds = 60;
constexpr std::size_t kMaxErrorBody = 64 * 1024;
constexpr std::size_t kMaxTokenBody = 1 << 20;
constexpr int kMaxRedirects = 10;
constexpr std::string_view kUserAgent = "cohort-image/0.1.0";

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r' ||
                           text.back() == '\n')) {
    text.remove_suffix(1);
  }
  return text;
}

// Printable ASCII only, cut short: what a server says goes into one line.
std::string Printable(std::string_view text, std::size_t limit = 200) {
  std::string out;
  for (const char c : text.substr(0, limit)) {
    const auto byte = static_cast<unsigned char>(c);
    out.push_back(byte < 0x20 || byte >= 0x7f ? ' ' : c);
  }
  return text.size() > limit ? out + "..." : out;
}

std::string Base64(std::string_view data) {
  std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
  const int length = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                     reinterpret_cast<const unsigned char*>(data.data()),
                                     static_cast<int>(data.size()));
  out.resize(static_cast<std::size_t>(std::max(length, 0)));
  return out;
}

struct UrlDeleter {
  void operator()(CURLU* url) const { curl_url_cleanup(url); }
};

// A part of a URL (curl's parser); empty when it has none.
std::string UrlPart(CURLU* url, CURLUPart part, unsigned flags = 0) {
  char* value = nullptr;
  if (curl_url_get(url, part, &value, flags) != CURLUE_OK || value == nullptr) return {};
  std::string out(value);
  curl_free(value);
  return out;
}

// scheme://host:port, for telling whether a redirect leaves the registry.
std::string Origin(const std::string& url) {
  std::unique_ptr<CURLU, UrlDeleter> parsed(curl_url());
  if (!parsed || curl_url_set(parsed.get(), CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) return {};
  return fmt::format("{}://{}:{}", Lower(UrlPart(parsed.get(), CURLUPART_SCHEME)),
                     Lower(UrlPart(parsed.get(), CURLUPART_HOST)),
                     UrlPart(parsed.get(), CURLUPART_PORT, CURLU_DEFAULT_PORT));
}

// `location` resolved against `base`; empty when it is not a URL.
std::string Resolve(const std::string& base, const std::string& location) {
  std::unique_ptr<CURLU, UrlDeleter> parsed(curl_url());
  if (!parsed || curl_url_set(parsed.get(), CURLUPART_URL, base.c_str(), 0) != CURLUE_OK ||
      curl_url_set(parsed.get(), CURLUPART_URL, location.c_str(), 0) != CURLUE_OK) {
    return {};
  }
  return UrlPart(parsed.get(), CURLUPART_URL);
}

// HOST[:PORT] of a URL, for credentials.
std::string HostOf(const std::string& url) {
  std::unique_ptr<CURLU, UrlDeleter> parsed(curl_url());
  if (!parsed || curl_url_set(parsed.get(), CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) return {};
  std::string host = Lower(UrlPart(parsed.get(), CURLUPART_HOST));
  const std::string port = UrlPart(parsed.get(), CURLUPART_PORT);
  return port.empty() ? host : host + ":" + port;
}

// The parameters of a WWW-Authenticate challenge: key="value", ...
std::vector<std::pair<std::string, std::string>> ChallengeParams(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> params;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == ',')) ++i;
    const std::size_t equals = text.find('=', i);
    if (equals == std::string_view::npos) break;
    std::string key = Lower(Trim(text.substr(i, equals - i)));
    i = equals + 1;
    std::string value;
    if (i < text.size() && text[i] == '"') {
      ++i;
      while (i < text.size() && text[i] != '"') {
        if (text[i] == '\\' && i + 1 < text.size()) ++i;
        value.push_back(text[i++]);
      }
      ++i;
    } else {
      while (i < text.size() && text[i] != ',') value.push_back(text[i++]);
      value = std::string(Trim(value));
    }
    params.emplace_back(std::move(key), std::move(value));
  }
  return params;
}

std::string Param(const std::vector<std::pair<std::string, std::string>>& params,
                  std::string_view key) {
  for (const auto& [name, value] : params) {
    if (name == key) return value;
  }
  return {};
}

std::string Escape(CURL* curl, const std::string& text) {
  char* escaped = curl_easy_escape(curl, text.c_str(), static_cast<int>(text.size()));
  std::string out = escaped != nullptr ? escaped : "";
  curl_free(escaped);
  return out;
}

bool IsRedirect(long status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

struct Transfer {
  std::string_view accept;
  const std::function<bool(std::string_view)>* sink = nullptr;
  long status = 0;
  std::string reason;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string error_body;
  bool sink_stopped = false;
};

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  const std::string_view line = Trim(std::string_view(data, size * count));
  if (line.starts_with("HTTP/")) {
    // A new response (after 100 Continue, or a proxy's): start over.
    transfer->headers.clear();
    const std::size_t space = line.find(' ');
    transfer->status = 0;
    transfer->reason.clear();
    if (space != std::string_view::npos) {
      std::string_view rest = line.substr(space + 1);
      for (std::size_t i = 0; i < rest.size() && i < 3 && rest[i] >= '0' && rest[i] <= '9'; ++i) {
        transfer->status = transfer->status * 10 + (rest[i] - '0');
      }
      if (rest.size() > 4) transfer->reason = Printable(Trim(rest.substr(4)), 80);
    }
  } else if (const std::size_t colon = line.find(':'); colon != std::string_view::npos) {
    transfer->headers.emplace_back(Lower(Trim(line.substr(0, colon))),
                                   std::string(Trim(line.substr(colon + 1))));
  }
  return size * count;
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  const std::string_view chunk(data, size * count);
  if (transfer->status >= 200 && transfer->status < 300) {
    if (!(*transfer->sink)(chunk)) {
      transfer->sink_stopped = true;
      return 0;
    }
    return chunk.size();
  }
  if (transfer->error_body.size() < kMaxErrorBody) {
    transfer->error_body.append(chunk.substr(0, kMaxErrorBody - transfer->error_body.size()));
  }
  return chunk.size();
}

struct HeaderListDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

bool IsTlsTrustError(std::string_view text) {
  return text.find("certificate") != std::string_view::npos ||
         text.find("SSL") != std::string_view::npos;
}

}  // namespace

std::string RegistryCause(long status, std::string_view reason, std::string_view body) {
  const nlohmann::json document = nlohmann::json::parse(body, nullptr, false);
  if (!document.is_discarded() && document.is_object()) {
    const auto errors = document.find("errors");
    if (errors != document.end() && errors->is_array() && !errors->empty() &&
        (*errors)[0].is_object()) {
      const nlohmann::json& first = (*errors)[0];
      const auto code = first.find("code");
      const auto message = first.find("message");
      std::string cause = fmt::format("{}", status);
      if (code != first.end() && code->is_string()) {
        cause += " " + Printable(code->get<std::string>(), 60);
      }
      if (message != first.end() && message->is_string() && !message->get<std::string>().empty()) {
        cause += ": " + Printable(message->get<std::string>());
      }
      return cause;
    }
  }
  return reason.empty() ? fmt::format("{}", status) : fmt::format("{} {}", status, reason);
}

std::string RegistryClient::Response::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return value;
  }
  return {};
}

RegistryClient::RegistryClient(container::ImageRef ref, RegistryOptions options)
    : ref_(std::move(ref)), options_(std::move(options)), curl_(curl_easy_init()) {
  for (std::string mirror : options_.mirrors) {
    while (!mirror.empty() && mirror.back() == '/') mirror.pop_back();
    endpoints_.push_back({.base = mirror, .host = HostOf(mirror), .mirror = true});
  }
  endpoints_.push_back({.base = "https://" + ref_.registry, .host = ref_.registry});
}

RegistryClient::~RegistryClient() {
  if (curl_ != nullptr) curl_easy_cleanup(curl_);
}

RegistryClient::Response RegistryClient::Perform(const std::string& url,
                                                 const std::string& authorization,
                                                 std::string_view accept, bool trusted,
                                                 const Sink& sink) {
  Response response;
  if (curl_ == nullptr) {
    response.curl_error = "libcurl could not start a transfer (out of memory)";
    return response;
  }
  curl_easy_reset(curl_);
  Transfer transfer;
  transfer.sink = &sink;
  std::array<char, CURL_ERROR_SIZE> error{};
  std::unique_ptr<curl_slist, HeaderListDeleter> headers;
  auto add_header = [&headers](const std::string& line) {
    curl_slist* list = curl_slist_append(headers.get(), line.c_str());
    if (list != nullptr) {
      (void)headers.release();
      headers.reset(list);
    }
  };
  if (!accept.empty()) add_header(fmt::format("Accept: {}", accept));
  if (!authorization.empty()) add_header(fmt::format("Authorization: {}", authorization));
  curl_easy_setopt(curl_, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl_, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl_, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl_, CURLOPT_CONNECTTIMEOUT, kConnectTimeoutSeconds);
  curl_easy_setopt(curl_, CURLOPT_LOW_SPEED_LIMIT, kLowSpeedBytes);
  curl_easy_setopt(curl_, CURLOPT_LOW_SPEED_TIME, kLowSpeedSeconds);
  curl_easy_setopt(curl_, CURLOPT_USERAGENT, std::string(kUserAgent).c_str());
  curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(curl_, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl_, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(curl_, CURLOPT_ERRORBUFFER, error.data());
  // The CA file is for the registry and its mirrors; object storage that a
  // blob redirects to is checked against the system's CAs.
  if (trusted && !options_.ca_file.empty()) {
    curl_easy_setopt(curl_, CURLOPT_CAINFO, options_.ca_file.c_str());
  }
  if (options_.max_rate > 0) {
    curl_easy_setopt(curl_, CURLOPT_MAX_RECV_SPEED_LARGE,
                     static_cast<curl_off_t>(options_.max_rate));
  }
  const CURLcode code = curl_easy_perform(curl_);
  // The header list must outlive the transfer; curl keeps a pointer to it.
  curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, nullptr);
  response.status = transfer.status;
  response.reason = std::move(transfer.reason);
  response.headers = std::move(transfer.headers);
  response.error_body = std::move(transfer.error_body);
  if (code != CURLE_OK) {
    response.curl_error = transfer.sink_stopped ? std::string("stopped")
                          : error[0] != '\0'    ? std::string(error.data())
                                                : std::string(curl_easy_strerror(code));
  }
  return response;
}

absl::StatusOr<RegistryClient::Response> RegistryClient::Get(const Endpoint& endpoint,
                                                             const std::string& path,
                                                             std::string_view accept,
                                                             const Sink& sink) {
  const std::string origin = Origin(endpoint.base);
  std::string url = endpoint.base + path;
  for (int hop = 0; hop <= kMaxRedirects; ++hop) {
    // A redirect elsewhere (object storage) must not see the registry's login.
    const bool trusted = Origin(url) == origin;
    Response response =
        Perform(url, trusted ? endpoint.authorization : std::string(), accept, trusted, sink);
    if (!response.curl_error.empty() || !IsRedirect(response.status)) return response;
    const std::string location = Resolve(url, response.Header("location"));
    if (location.empty()) return response;
    url = location;
  }
  return absl::UnavailableError(
      fmt::format("{}{} redirected more than {} times; check the registry", endpoint.base, path,
                  kMaxRedirects));
}

std::string RegistryClient::NoLoginHint(const Endpoint& endpoint) const {
  const std::string login = ref_.user.empty() ? std::string("USER") : ref_.user;
  // enroot's (curl's netrc) machine is the host without the port.
  std::string host = endpoint.host;
  if (const std::size_t colon = host.rfind(':');
      colon != std::string::npos && host.find(']', colon) == std::string::npos) {
    host.resize(colon);
  }
  if (options_.credentials_path.empty()) {
    return fmt::format("pass --credentials FILE holding `machine {} login {} password PASSWORD`",
                       host, login);
  }
  return fmt::format("add `machine {} login {} password PASSWORD` to the credentials file {}", host,
                     login, options_.credentials_path);
}

absl::Status RegistryClient::Refusal(const Endpoint& endpoint, const Response& response,
                                     std::string_view what) const {
  const std::string cause = RegistryCause(response.status, response.reason, response.error_body);
  if (!endpoint.login.empty()) {
    if (response.status == 401) {
      return absl::PermissionDeniedError(fmt::format(
          "the registry refused the login for user \"{}\" ({}); check the credentials file {}",
          endpoint.login, cause, options_.credentials_path));
    }
    return absl::PermissionDeniedError(fmt::format(
        "the registry denied user \"{}\" access to {} ({}); check that this user may pull it",
        endpoint.login, what, cause));
  }
  return absl::PermissionDeniedError(
      fmt::format("the registry refused anonymous access to {} ({}); check the image name, or {}",
                  what, cause, NoLoginHint(endpoint)));
}

absl::Status RegistryClient::Prepare(Endpoint& endpoint) {
  const std::string url = endpoint.base + "/v2/";
  const Response response = Perform(url, {}, {}, true, [](std::string_view) { return true; });
  if (!response.curl_error.empty()) {
    return absl::UnavailableError(fmt::format(
        "cannot reach the registry at {} ({}); {}", url, response.curl_error,
        IsTlsTrustError(response.curl_error) ? "pass the registry's CA certificate with --ca-file"
                                             : "check the registry's address and that it is up"));
  }
  if (response.status == 200) {
    endpoint.ready = true;
    return absl::OkStatus();
  }
  if (response.status != 401) {
    return absl::UnavailableError(fmt::format(
        "the registry answered GET {} with {}; check that it serves the OCI distribution API", url,
        RegistryCause(response.status, response.reason, response.error_body)));
  }
  const std::string challenge = response.Header("www-authenticate");
  const std::string scheme = Lower(challenge.substr(0, challenge.find(' ')));
  if (scheme == "basic") {
    const Credential* credential = FindCredential(options_.credentials, endpoint.host, ref_.user);
    if (credential == nullptr) {
      return absl::UnauthenticatedError(
          fmt::format("the registry asks for a login ({}); {}",
                      RegistryCause(response.status, response.reason, response.error_body),
                      NoLoginHint(endpoint)));
    }
    endpoint.authorization =
        "Basic " + Base64(fmt::format("{}:{}", credential->login, credential->password));
    endpoint.login = credential->login;
    endpoint.ready = true;
    return absl::OkStatus();
  }
  if (scheme == "bearer") {
    absl::Status status = Token(endpoint, std::string_view(challenge).substr(scheme.size()));
    if (status.ok()) endpoint.ready = true;
    return status;
  }
  return absl::UnimplementedError(fmt::format(
      "the registry asks for a login of kind \"{}\", which is not supported (only Basic and "
      "Bearer are)",
      Printable(scheme, 40)));
}

absl::Status RegistryClient::Token(Endpoint& endpoint, std::string_view challenge) {
  const auto params = ChallengeParams(challenge);
  const std::string realm = Param(params, "realm");
  const std::string scheme = Lower(realm.substr(0, realm.find(':')));
  if (scheme != "https" && scheme != "http") {
    return absl::UnavailableError(
        fmt::format("the registry's login challenge has no token service URL (realm \"{}\")",
                    Printable(realm, 120)));
  }
  const Credential* credential = FindCredential(options_.credentials, HostOf(realm), ref_.user);
  if (credential == nullptr) {
    credential = FindCredential(options_.credentials, endpoint.host, ref_.user);
  }
  if (credential != nullptr && scheme != "https") {
    return absl::FailedPreconditionError(fmt::format(
        "the registry's token service {} is not HTTPS; refusing to send the login of user \"{}\" "
        "over it",
        Printable(realm, 120), credential->login));
  }
  std::string url = realm + (realm.find('?') == std::string::npos ? "?" : "&");
  const std::string service = Param(params, "service");
  if (!service.empty()) url += "service=" + Escape(curl_, service) + "&";
  url += "scope=" + Escape(curl_, fmt::format("repository:{}:pull", ref_.repository));
  const std::string authorization =
      credential == nullptr
          ? std::string()
          : "Basic " + Base64(fmt::format("{}:{}", credential->login, credential->password));
  std::string body;
  const Response response =
      Perform(url, authorization, "application/json", Origin(url) == Origin(endpoint.base),
              [&body](std::string_view chunk) {
                if (body.size() + chunk.size() > kMaxTokenBody) return false;
                body.append(chunk);
                return true;
              });
  const std::string shown = Printable(realm, 120);
  if (!response.curl_error.empty()) {
    return absl::UnavailableError(
        fmt::format("cannot get a token from the registry's token "
                    "service {} ({}); check that it is up",
                    shown, response.curl_error));
  }
  const std::string cause = RegistryCause(response.status, response.reason, response.error_body);
  if (response.status == 401 || response.status == 403) {
    if (credential != nullptr) {
      return absl::PermissionDeniedError(fmt::format(
          "the registry refused the login for user \"{}\" ({}); check the credentials file {}",
          credential->login, cause, options_.credentials_path));
    }
    return absl::UnauthenticatedError(
        fmt::format("the registry's token service refused anonymous access ({}); {}", cause,
                    NoLoginHint(endpoint)));
  }
  if (response.status != 200) {
    return absl::UnavailableError(
        fmt::format("the registry's token service {} answered {}; try again later", shown, cause));
  }
  const nlohmann::json document = nlohmann::json::parse(body, nullptr, false);
  std::string token;
  if (!document.is_discarded() && document.is_object()) {
    for (const char* key : {"token", "access_token"}) {
      const auto it = document.find(key);
      if (it != document.end() && it->is_string() && !it->get<std::string>().empty()) {
        token = it->get<std::string>();
        break;
      }
    }
  }
  if (token.empty()) {
    return absl::UnavailableError(
        fmt::format("the registry's token service {} answered without a token", shown));
  }
  endpoint.authorization = "Bearer " + token;
  endpoint.login = credential != nullptr ? credential->login : std::string();
  return absl::OkStatus();
}

template <typename Attempt>
absl::Status RegistryClient::OnEachEndpoint(const Attempt& attempt) {
  std::string mirrors_failed;
  for (Endpoint& endpoint : endpoints_) {
    if (endpoint.broken) continue;
    absl::Status status = endpoint.ready ? absl::OkStatus() : Prepare(endpoint);
    if (status.ok()) status = attempt(endpoint);
    if (status.ok() || !endpoint.mirror) {
      if (status.ok() || mirrors_failed.empty()) return status;
      return absl::Status(
          status.code(), fmt::format("{} (after the mirror {})", status.message(), mirrors_failed));
    }
    endpoint.broken = true;
    mirrors_failed += fmt::format("{}{} failed: {}", mirrors_failed.empty() ? "" : "; ",
                                  endpoint.base, status.message());
  }
  return absl::InternalError("no endpoint for the registry");
}

absl::StatusOr<FetchedManifest> RegistryClient::FetchManifest(std::string_view reference) {
  const bool by_digest = reference.starts_with("sha256:");
  FetchedManifest fetched;
  const absl::Status status = OnEachEndpoint([&](const Endpoint& endpoint) -> absl::Status {
    std::string body;
    bool too_big = false;
    absl::StatusOr<Response> response =
        Get(endpoint, fmt::format("/v2/{}/manifests/{}", ref_.repository, reference),
            kManifestAccept, [&](std::string_view chunk) {
              if (static_cast<std::int64_t>(body.size() + chunk.size()) > kMaxManifestBytes) {
                too_big = true;
                return false;
              }
              body.append(chunk);
              return true;
            });
    if (!response.ok()) return response.status();
    if (too_big) {
      return absl::InvalidArgumentError(fmt::format("the manifest {} is over the limit of {} bytes",
                                                    reference, kMaxManifestBytes));
    }
    if (!response->curl_error.empty()) {
      return absl::UnavailableError(fmt::format(
          "the transfer of the manifest from {} failed ({}); check that the registry is up",
          endpoint.base, response->curl_error));
    }
    const std::string cause =
        RegistryCause(response->status, response->reason, response->error_body);
    switch (response->status) {
      case 200:
        break;
      case 401:
      case 403:
        return Refusal(endpoint, *response, ref_.repository);
      case 404:
        if (cause.find("NAME_UNKNOWN") != std::string::npos) {
          return absl::NotFoundError(
              fmt::format("the registry has no repository {} ({}); check the image name",
                          ref_.repository, cause));
        }
        return absl::NotFoundError(
            fmt::format("the registry has no such manifest ({}); check the {}", cause,
                        by_digest ? "digest" : "tag"));
      case 429:
        return absl::ResourceExhaustedError(
            fmt::format("the registry limits the rate of pulls ({}); try again later{}", cause,
                        endpoint.login.empty() ? ", or log in" : ""));
      default:
        return absl::UnavailableError(fmt::format(
            "the registry answered the manifest request with {}; try again later", cause));
    }
    fetched.media_type = response->Header("content-type");
    fetched.digest = Sha256Digest(body);
    fetched.body = std::move(body);
    if (by_digest && fetched.digest != reference) {
      return absl::InvalidArgumentError(
          fmt::format("manifest {} does not match its digest (got {})", reference, fetched.digest));
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return fetched;
}

absl::Status RegistryClient::FetchBlob(const Descriptor& blob, std::string_view kind,
                                       const std::string& path) {
  return OnEachEndpoint([&](const Endpoint& endpoint) -> absl::Status {
    absl::StatusOr<BlobFile> file = BlobFile::Create(path, blob, kind);
    if (!file.ok()) return file.status();
    absl::StatusOr<Response> response =
        Get(endpoint, fmt::format("/v2/{}/blobs/{}", ref_.repository, blob.digest), {},
            [&file](std::string_view chunk) { return file->Write(chunk); });
    if (!response.ok()) return response.status();
    if (!file->error().ok()) return file->error();
    if (!response->curl_error.empty()) {
      return absl::UnavailableError(
          fmt::format("the download of {} {} from {} failed ({}); check that the registry is up "
                      "and try again",
                      kind, blob.digest, endpoint.base, response->curl_error));
    }
    const std::string cause =
        RegistryCause(response->status, response->reason, response->error_body);
    switch (response->status) {
      case 200:
        return file->Finish();
      case 401:
      case 403:
        return Refusal(endpoint, *response, ref_.repository);
      case 404:
        return absl::NotFoundError(fmt::format(
            "the registry has no {} {} ({}); the image is incomplete there, push it again", kind,
            blob.digest, cause));
      default:
        return absl::UnavailableError(
            fmt::format("the registry answered the request for {} {} with {}; try again later",
                        kind, blob.digest, cause));
    }
  });
}

}  // namespace cohort::image
