// SPDX-License-Identifier: Apache-2.0
#include "credentials.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "open_as.h"
#include "unique_fd.h"

namespace cohort::image {
namespace {

constexpr std::string_view kEntryForm = "write machine HOST login USER password PASS";

struct Word {
  std::string_view text;
  int line = 0;
};

std::vector<Word> Words(std::string_view text) {
  std::vector<Word> words;
  int line = 1;
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      ++i;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      ++i;
    } else if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else {
      const std::size_t start = i;
      while (i < text.size() && text[i] != ' ' && text[i] != '\t' && text[i] != '\n' &&
             text[i] != '\r' && text[i] != '\f' && text[i] != '\v') {
        ++i;
      }
      words.push_back({text.substr(start, i - start), line});
    }
  }
  return words;
}

// A word as an error message may show it: printable ASCII, cut short.
std::string Shown(std::string_view word) {
  std::string out;
  for (const char c : word.substr(0, 40)) {
    const auto byte = static_cast<unsigned char>(c);
    out.push_back(byte < 0x20 || byte >= 0x7f ? '?' : c);
  }
  return word.size() > 40 ? out + "..." : out;
}

}  // namespace

absl::StatusOr<std::vector<Credential>> ParseCredentials(std::string_view text,
                                                         std::string_view path) {
  const std::vector<Word> words = Words(text);
  std::vector<Credential> credentials;
  bool open = false;  // an entry has begun
  int entry_line = 0;
  auto close_entry = [&]() -> absl::Status {
    if (!open) return absl::OkStatus();
    const Credential& last = credentials.back();
    if (last.login.empty() || last.password.empty()) {
      return absl::InvalidArgumentError(
          fmt::format("{}:{}: the entry for {} has no {}; {}", path, entry_line,
                      last.machine.empty() ? std::string("default") : Shown(last.machine),
                      last.login.empty() ? "login" : "password", kEntryForm));
    }
    return absl::OkStatus();
  };
  for (std::size_t i = 0; i < words.size(); ++i) {
    const Word& word = words[i];
    if (word.text == "default") {
      if (absl::Status status = close_entry(); !status.ok()) return status;
      credentials.push_back({});
      open = true;
      entry_line = word.line;
      continue;
    }
    if (word.text != "machine" && word.text != "login" && word.text != "password" &&
        word.text != "account") {
      return absl::InvalidArgumentError(fmt::format("{}:{}: unknown word \"{}\"; {}", path,
                                                    word.line, Shown(word.text), kEntryForm));
    }
    if (i + 1 >= words.size()) {
      return absl::InvalidArgumentError(
          fmt::format("{}:{}: \"{}\" needs a value; {}", path, word.line, word.text, kEntryForm));
    }
    const std::string_view value = words[++i].text;
    if (word.text == "machine") {
      if (absl::Status status = close_entry(); !status.ok()) return status;
      credentials.push_back({.machine = std::string(value), .login = {}, .password = {}});
      open = true;
      entry_line = word.line;
    } else if (!open) {
      return absl::InvalidArgumentError(fmt::format("{}:{}: \"{}\" comes before any machine; {}",
                                                    path, word.line, word.text, kEntryForm));
    } else if (word.text == "login") {
      credentials.back().login = std::string(value);
    } else if (word.text == "password") {
      credentials.back().password = std::string(value);
    }
  }
  if (absl::Status status = close_entry(); !status.ok()) return status;
  return credentials;
}

const Credential* FindCredential(const std::vector<Credential>& credentials, std::string_view host,
                                 std::string_view user) {
  std::string_view bare = host;
  if (bare.starts_with('[')) {
    bare = bare.substr(0, bare.find(']') + 1);
  } else if (const std::size_t colon = bare.rfind(':'); colon != std::string_view::npos) {
    bare = bare.substr(0, colon);
  }
  for (const std::string_view machine : {host, bare, std::string_view()}) {
    for (const Credential& credential : credentials) {
      if (credential.machine == machine && (user.empty() || credential.login == user)) {
        return &credential;
      }
    }
  }
  return nullptr;
}

absl::StatusOr<std::string> ReadCredentialsFile(const std::string& path,
                                                std::optional<uid_t> as_uid) {
  absl::StatusOr<UniqueFd> fd = OpenAsUser(path, as_uid, "the credentials file");
  if (!fd.ok()) return fd.status();
  struct stat info {};
  if (::fstat(fd->get(), &info) != 0) {
    return absl::UnavailableError(
        fmt::format("cannot inspect the credentials file {}: {}", path, std::strerror(errno)));
  }
  if (!S_ISREG(info.st_mode)) {
    return absl::FailedPreconditionError(fmt::format(
        "the credentials file {} is not a regular file; point --credentials at a file", path));
  }
  if (static_cast<std::size_t>(info.st_size) > kMaxCredentialsBytes) {
    return absl::FailedPreconditionError(
        fmt::format("the credentials file {} is {} bytes, over the limit of {}", path, info.st_size,
                    kMaxCredentialsBytes));
  }
  std::string text;
  char buffer[8192];
  while (true) {
    const ssize_t got = ::read(fd->get(), buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return absl::UnavailableError(
          fmt::format("cannot read the credentials file {}: {}", path, std::strerror(errno)));
    }
    if (got == 0) break;
    text.append(buffer, static_cast<std::size_t>(got));
    if (text.size() > kMaxCredentialsBytes) {
      return absl::FailedPreconditionError(fmt::format(
          "the credentials file {} is over the limit of {} bytes", path, kMaxCredentialsBytes));
    }
  }
  return text;
}

}  // namespace cohort::image
