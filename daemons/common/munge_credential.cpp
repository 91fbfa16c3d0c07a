// SPDX-License-Identifier: Apache-2.0
#include "munge_credential.h"

#include <munge.h>

#include <cstdlib>
#include <memory>

#include <fmt/format.h>

namespace cohort::shell {
namespace {

struct ContextDeleter {
  void operator()(munge_ctx_t context) const { munge_ctx_destroy(context); }
};
using Context = std::unique_ptr<std::remove_pointer_t<munge_ctx_t>, ContextDeleter>;

absl::StatusOr<Context> ContextFor(const std::string& socket) {
  Context context(munge_ctx_create());
  if (context == nullptr) return absl::ResourceExhaustedError("munge: out of memory");
  if (!socket.empty() &&
      munge_ctx_set(context.get(), MUNGE_OPT_SOCKET, socket.c_str()) != EMUNGE_SUCCESS) {
    return absl::InvalidArgumentError(fmt::format("munge: cannot use socket {}", socket));
  }
  return context;
}

absl::Status Unreachable(const std::string& socket, munge_ctx_t context) {
  return absl::UnavailableError(fmt::format(
      "munged does not answer on {} ({}); start it (systemctl start munge) or name its socket "
      "with AuthInfo=socket=PATH in cohort.conf",
      MungeSocketName(socket), munge_ctx_strerror(context)));
}

bool IsTransportError(munge_err_t error) {
  return error == EMUNGE_SOCKET || error == EMUNGE_TIMEOUT || error == EMUNGE_SNAFU ||
         error == EMUNGE_NO_MEMORY;
}

}  // namespace

std::string MungeSocketName(const std::string& socket) {
  return socket.empty() ? std::string("/run/munge/munge.socket.2") : socket;
}

absl::StatusOr<std::string> EncodeMungeCredential(const std::string& socket,
                                                  std::string_view payload) {
  absl::StatusOr<Context> context = ContextFor(socket);
  if (!context.ok()) return context.status();
  char* credential = nullptr;
  const munge_err_t error =
      munge_encode(&credential, context->get(), payload.data(), static_cast<int>(payload.size()));
  const std::unique_ptr<char, decltype(&std::free)> owned(credential, &std::free);
  if (error != EMUNGE_SUCCESS) return Unreachable(socket, context->get());
  return std::string(credential);
}

absl::StatusOr<MungeIdentity> DecodeMungeCredential(const std::string& socket,
                                                    std::string_view credential) {
  absl::StatusOr<Context> context = ContextFor(socket);
  if (!context.ok()) return context.status();
  const std::string text(credential);
  void* payload = nullptr;
  int length = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  const munge_err_t error =
      munge_decode(text.c_str(), context->get(), &payload, &length, &uid, &gid);
  const std::unique_ptr<void, decltype(&std::free)> owned(payload, &std::free);
  if (error != EMUNGE_SUCCESS) {
    if (IsTransportError(error)) return Unreachable(socket, context->get());
    return absl::UnauthenticatedError(
        fmt::format("MUNGE credential refused: {}", munge_ctx_strerror(context->get())));
  }
  MungeIdentity out;
  out.uid = uid;
  out.gid = gid;
  if (payload != nullptr && length > 0) {
    out.payload.assign(static_cast<const char*>(payload), static_cast<std::size_t>(length));
  }
  return out;
}

}  // namespace cohort::shell
