// SPDX-License-Identifier: Apache-2.0
#include "cohort/container/image_ref.h"

#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "fmt/format.h"

namespace cohort::container {
namespace {

// The forms, as each error message shows them.
constexpr std::string_view kEnrootForm =
    "write [USER@][REGISTRY#]IMAGE[:TAG], e.g. nvcr.io#nvidia/pytorch:24.07-py3";
constexpr std::string_view kDockerForm =
    "write docker://[USER@][REGISTRY/]IMAGE[:TAG], e.g. docker://nvcr.io/nvidia/pytorch:24.07-py3";

// The OCI distribution spec leaves the name's length to registries; Docker
// and most registries stop at 255.
constexpr std::size_t kMaxRepositoryLength = 255;
constexpr std::size_t kMaxTagLength = 128;
constexpr std::size_t kSha256HexLength = 64;

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsUpper(char c) { return c >= 'A' && c <= 'Z'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// The reference as an error message quotes it: control characters and
// non-ASCII bytes shown as '?', so that a message stays one line.
std::string Quoted(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    out.push_back(byte < 0x20 || byte >= 0x7f ? '?' : c);
  }
  out.push_back('"');
  return out;
}

class Parser {
 public:
  Parser(std::string_view text, std::string_view form) : text_(text), form_(form) {}

  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(fmt::format("image {}: {}; {}", Quoted(text_), what, form_));
  }

  // One path component: [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*
  absl::Status CheckComponent(std::string_view repository, std::string_view component) const {
    if (component.empty()) {
      return Error(fmt::format("repository {} has an empty path component", Quoted(repository)));
    }
    for (const char c : component) {
      if (IsUpper(c)) {
        return Error(fmt::format("repository {} must be lowercase", Quoted(repository)));
      }
      if (!IsLowerAlnum(c) && c != '.' && c != '_' && c != '-') {
        return Error(fmt::format(
            "repository {} holds '{}', which is not one of a-z, 0-9, '.', '_', '-' and '/'",
            Quoted(repository), Quoted(std::string_view(&c, 1)).substr(1, 1)));
      }
    }
    const absl::Status separators = Error(fmt::format(
        "repository {} must start and end each path component with a letter or digit and join "
        "their parts with '.', '_', '__' or dashes",
        Quoted(repository)));
    if (!IsLowerAlnum(component.front()) || !IsLowerAlnum(component.back())) return separators;
    for (std::size_t i = 0; i < component.size();) {
      if (IsLowerAlnum(component[i])) {
        ++i;
        continue;
      }
      std::size_t end = i;
      while (end < component.size() && !IsLowerAlnum(component[end])) ++end;
      const std::string_view run = component.substr(i, end - i);
      const bool dashes = run.find_first_not_of('-') == std::string_view::npos;
      if (run != "." && run != "_" && run != "__" && !dashes) return separators;
      i = end;
    }
    return absl::OkStatus();
  }

  absl::Status CheckRepository(std::string_view repository) const {
    if (repository.empty()) return Error("the image name is missing");
    if (repository.size() > kMaxRepositoryLength) {
      return Error(fmt::format("repository is {} bytes long, over the limit of {}",
                               repository.size(), kMaxRepositoryLength));
    }
    std::size_t start = 0;
    while (true) {
      const std::size_t slash = repository.find('/', start);
      const std::string_view component = repository.substr(
          start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
      if (absl::Status status = CheckComponent(repository, component); !status.ok()) {
        return status;
      }
      if (slash == std::string_view::npos) break;
      start = slash + 1;
    }
    return absl::OkStatus();
  }

  absl::Status CheckTag(std::string_view tag) const {
    bool good =
        !tag.empty() && tag.size() <= kMaxTagLength && tag.front() != '.' && tag.front() != '-';
    for (const char c : tag) {
      good = good && (IsLowerAlnum(c) || IsUpper(c) || c == '_' || c == '.' || c == '-');
    }
    if (good) return absl::OkStatus();
    return Error(fmt::format(
        "tag {} must be 1 to {} of A-Z, a-z, 0-9, '_', '.' and '-', not starting with '.' or '-'",
        Quoted(tag), kMaxTagLength));
  }

  absl::Status CheckDigest(std::string_view digest) const {
    constexpr std::string_view kPrefix = "sha256:";
    bool good = digest.starts_with(kPrefix) && digest.size() == kPrefix.size() + kSha256HexLength;
    for (std::size_t i = kPrefix.size(); good && i < digest.size(); ++i) {
      good = IsDigit(digest[i]) || (digest[i] >= 'a' && digest[i] <= 'f');
    }
    if (good) return absl::OkStatus();
    return Error(
        fmt::format("digest {} must be sha256: and 64 lowercase hex digits", Quoted(digest)));
  }

  // HOST[:PORT]: a DNS name or IPv4 address, or [IPv6]; lowercased.
  absl::StatusOr<std::string> CheckRegistry(std::string_view registry) const {
    const absl::Status bad = Error(
        fmt::format("registry {} must be HOST or HOST:PORT (letters, digits, '.' and '-'; [IPv6])",
                    Quoted(registry)));
    if (registry.empty()) return Error("the registry before '#' is empty");
    std::string_view host = registry;
    std::string_view port;
    if (host.front() == '[') {
      const std::size_t close = host.find(']');
      if (close == std::string_view::npos) return bad;
      for (const char c : host.substr(1, close - 1)) {
        if (!IsHex(c) && c != ':' && c != '.') return bad;
      }
      if (close + 1 < host.size()) {
        if (host[close + 1] != ':') return bad;
        port = host.substr(close + 2);
        if (port.empty()) return bad;
      }
      host = host.substr(0, close + 1);
    } else {
      const std::size_t colon = host.find(':');
      if (colon != std::string_view::npos) {
        port = host.substr(colon + 1);
        host = host.substr(0, colon);
        if (port.empty()) return bad;
      }
      if (host.empty() || host.front() == '-' || host.front() == '.' || host.back() == '-') {
        return bad;
      }
      for (const char c : host) {
        if (!IsLowerAlnum(c) && !IsUpper(c) && c != '.' && c != '-') return bad;
      }
    }
    if (port.size() > 5) return bad;
    int value = 0;
    for (const char c : port) {
      if (!IsDigit(c)) return bad;
      value = value * 10 + (c - '0');
    }
    if (!port.empty() && (value == 0 || value > 65535)) return bad;
    std::string lower(registry);
    for (char& c : lower) {
      if (IsUpper(c)) c = static_cast<char>(c - 'A' + 'a');
    }
    return lower;
  }

  absl::Status CheckUser(std::string_view user) const {
    if (user.empty()) return Error("the user before '@' is empty");
    for (const char c : user) {
      const auto byte = static_cast<unsigned char>(c);
      if (byte <= 0x20 || byte == 0x7f || c == '/' || c == '#') {
        return Error(
            fmt::format("user {} holds a space, control character, '/' or '#'", Quoted(user)));
      }
    }
    return absl::OkStatus();
  }

  // NAME[:TAG][@DIGEST] into ref (repository still unchecked).
  absl::Status SplitName(std::string_view name, ImageRef& ref) const {
    if (const std::size_t at = name.rfind('@'); at != std::string_view::npos) {
      ref.digest = std::string(name.substr(at + 1));
      if (absl::Status status = CheckDigest(ref.digest); !status.ok()) return status;
      name = name.substr(0, at);
    }
    const std::size_t slash = name.rfind('/');
    const std::size_t colon = name.rfind(':');
    if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
      ref.tag = std::string(name.substr(colon + 1));
      if (absl::Status status = CheckTag(ref.tag); !status.ok()) return status;
      name = name.substr(0, colon);
    }
    ref.repository = std::string(name);
    return absl::OkStatus();
  }

  // Docker Hub's names: docker.io and index.docker.io are its API host, and
  // its official images live under library/.
  absl::Status Finish(ImageRef& ref) const {
    if (ref.registry.empty() || ref.registry == "docker.io" || ref.registry == "index.docker.io") {
      ref.registry = std::string(kDockerHub);
    }
    if (absl::Status status = CheckRepository(ref.repository); !status.ok()) return status;
    if (ref.registry == kDockerHub && ref.repository.find('/') == std::string::npos) {
      ref.repository = "library/" + ref.repository;
    }
    if (ref.tag.empty() && ref.digest.empty()) ref.tag = "latest";
    return absl::OkStatus();
  }

  // `[USER@][REGISTRY#]IMAGE[:TAG][@DIGEST]`.
  absl::StatusOr<ImageRef> Enroot(std::string_view text) const {
    ImageRef ref;
    const std::size_t hash = text.find('#');
    std::string_view name = text;
    if (hash != std::string_view::npos) {
      std::string_view head = text.substr(0, hash);
      name = text.substr(hash + 1);
      if (const std::size_t at = head.find('@'); at != std::string_view::npos) {
        ref.user = std::string(head.substr(0, at));
        if (absl::Status status = CheckUser(ref.user); !status.ok()) return status;
        head = head.substr(at + 1);
      }
      absl::StatusOr<std::string> registry = CheckRegistry(head);
      if (!registry.ok()) return registry.status();
      ref.registry = *std::move(registry);
      if (name.find('#') != std::string_view::npos) return Error("it holds '#' twice");
    } else if (const std::size_t at = name.find('@');
               at != std::string_view::npos && !LooksLikeDigest(name.substr(at + 1))) {
      ref.user = std::string(name.substr(0, at));
      if (absl::Status status = CheckUser(ref.user); !status.ok()) return status;
      name = name.substr(at + 1);
    }
    if (absl::Status status = SplitName(name, ref); !status.ok()) return status;
    if (absl::Status status = Finish(ref); !status.ok()) return status;
    return ref;
  }

  // `[USER@][REGISTRY/]IMAGE[:TAG][@DIGEST]`, after docker://.
  absl::StatusOr<ImageRef> Docker(std::string_view text) const {
    ImageRef ref;
    std::string_view name = text;
    const std::size_t at = name.find('@');
    const std::size_t slash = name.find('/');
    if (at != std::string_view::npos && (slash == std::string_view::npos || at < slash) &&
        !LooksLikeDigest(name.substr(at + 1))) {
      ref.user = std::string(name.substr(0, at));
      if (absl::Status status = CheckUser(ref.user); !status.ok()) return status;
      name = name.substr(at + 1);
    }
    if (const std::size_t first = name.find('/'); first != std::string_view::npos) {
      const std::string_view component = name.substr(0, first);
      if (component.find_first_of(".:") != std::string_view::npos || component == "localhost") {
        absl::StatusOr<std::string> registry = CheckRegistry(component);
        if (!registry.ok()) return registry.status();
        ref.registry = *std::move(registry);
        name = name.substr(first + 1);
      }
    }
    if (absl::Status status = SplitName(name, ref); !status.ok()) return status;
    if (absl::Status status = Finish(ref); !status.ok()) return status;
    return ref;
  }

 private:
  // ALGORITHM:HEX, as after a digest's '@' (and never after a user's).
  static bool LooksLikeDigest(std::string_view text) {
    const std::size_t colon = text.find(':');
    if (colon == std::string_view::npos || colon == 0 || text.size() - colon - 1 < 32) {
      return false;
    }
    for (const char c : text.substr(0, colon)) {
      if (!IsLowerAlnum(c) && c != '+' && c != '.' && c != '_' && c != '-') return false;
    }
    for (const char c : text.substr(colon + 1)) {
      if (!IsHex(c)) return false;
    }
    return true;
  }

  std::string_view text_;
  std::string_view form_;
};

}  // namespace

absl::StatusOr<ImageSource> ParseImageReference(std::string_view text) {
  const Parser enroot(text, kEnrootForm);
  if (text.size() > kMaxReferenceLength) {
    return absl::InvalidArgumentError(
        fmt::format("image {}...: the reference is {} bytes long, over the limit of {}; {}",
                    Quoted(text.substr(0, 64)), text.size(), kMaxReferenceLength, kEnrootForm));
  }
  if (text.empty()) return enroot.Error("the reference is empty");
  ImageSource source;
  for (const std::string_view prefix :
       {std::string_view("oci:"), std::string_view("oci-archive:")}) {
    if (text.starts_with(prefix)) {
      source.kind = SourceKind::kOciLayout;
      source.path = std::string(text.substr(prefix.size()));
      if (source.path.empty()) {
        return absl::InvalidArgumentError(
            fmt::format("image {}: the path of the OCI image layout is missing; write {}PATH",
                        Quoted(text), prefix));
      }
      return source;
    }
  }
  if (text.starts_with("docker://")) {
    const std::string_view rest = text.substr(9);
    absl::StatusOr<ImageRef> ref = rest.find('#') != std::string_view::npos
                                       ? Parser(text, kEnrootForm).Enroot(rest)
                                       : Parser(text, kDockerForm).Docker(rest);
    if (!ref.ok()) return ref.status();
    source.ref = *std::move(ref);
    return source;
  }
  const bool is_path = text.starts_with('/') || text.starts_with("./") || text.starts_with("../");
  if (text.ends_with(".sqsh")) {
    if (!is_path && text.find('/') == std::string_view::npos) {
      return absl::InvalidArgumentError(
          fmt::format("image {}: a squashfs file needs a path with a slash; write ./{}",
                      Quoted(text), Quoted(text).substr(1, text.size())));
    }
    if (text.find('#') == std::string_view::npos) {
      source.kind = SourceKind::kSquashfs;
      source.path = std::string(text);
      return source;
    }
  }
  if (is_path) {
    source.kind = SourceKind::kOciLayout;
    source.path = std::string(text);
    return source;
  }
  absl::StatusOr<ImageRef> ref = enroot.Enroot(text);
  if (!ref.ok()) return ref.status();
  source.ref = *std::move(ref);
  return source;
}

std::string FormatImageReference(const ImageRef& ref) {
  if (!ref.digest.empty()) return fmt::format("{}#{}@{}", ref.registry, ref.repository, ref.digest);
  return fmt::format("{}#{}:{}", ref.registry, ref.repository, ref.tag);
}

}  // namespace cohort::container
