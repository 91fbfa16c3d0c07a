// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

using SSL = struct ssl_st;
using SSL_CTX = struct ssl_ctx_st;

namespace cohort::tls {

/// Which end of a connection a session is.
enum class TlsSide { kClient, kServer };

/// What the server end of the controller's TCP port shows and checks: its
/// certificate chain and key (PEM), and, with a CA, client certificates
/// signed by it (asked for, not required: a user's command shows none).
/// Selects ALPN h2, as gRPC's clients require. Shared by every session it
/// starts; immutable once made, so any thread may start sessions.
class TlsServerContext {
 public:
  /// InvalidArgument, saying which, when OpenSSL refuses a PEM.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<TlsServerContext>> Make(
      std::string_view certificate_chain, std::string_view private_key, std::string_view ca);
  ~TlsServerContext();
  TlsServerContext(const TlsServerContext&) = delete;
  TlsServerContext& operator=(const TlsServerContext&) = delete;

  [[nodiscard]] SSL_CTX* Context() const { return context_; }

 private:
  explicit TlsServerContext(SSL_CTX* context) : context_(context) {}
  SSL_CTX* context_;
};

/// One end of a TLS connection (OpenSSL), on a connected socket the caller
/// owns and polls (non-blocking, or blocking where the caller may wait).
/// Two kinds:
///
/// - Start: the client of the controller's TCP port. The controller's
///   certificate is verified against the CA file (empty: the system's CAs)
///   and against the address dialled (its host name, or its IP address),
///   and ALPN offers h2 as gRPC asks.
/// - StartPsk: either end of a step's I/O stream (cohort/io_frame.h), which
///   has no certificates: both ends hold the step's key, which the
///   controller carried to the stepd, and prove it by TLS 1.2's pre-shared
///   key ciphers with ECDHE, so that a key learnt later does not open a
///   recorded stream. A peer without the key fails the handshake.
///
/// Each step says what the socket must become (readable or writable) when
/// it cannot go on yet.
///
/// OpenSSL writes with write(2), so a peer that closed raises SIGPIPE;
/// each step blocks it around its call (four system calls) unless the
/// calling thread blocked it for good (BlockSigpipeInThisThread).
class TlsSession {
 public:
  /// What a step did: `bytes` > 0 moved; 0 and no `wait`: the peer closed;
  /// `wait` (POLLIN or POLLOUT): poll for it, then step again; `error`: the
  /// session is broken, saying why.
  struct Step {
    ssize_t bytes = 0;
    short wait = 0;
    std::string error;
  };

  /// Blocks SIGPIPE in the calling thread from now on: a thread that runs
  /// many sessions (the controller's HTTP/2 guard) then steps them without
  /// blocking it around each call. A SIGPIPE raised later stays pending,
  /// harmless, in that thread alone.
  static void BlockSigpipeInThisThread();

  /// A session for `fd` to `host` (a name, or an IPv4/IPv6 address).
  /// InvalidArgument when the CA file cannot be read.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TlsSession>> Start(int fd,
                                                                         const std::string& ca_file,
                                                                         const std::string& host);
  /// A session of a step's I/O stream on `fd`, keyed by `key_hex` (the
  /// step's key: hex digits, 16 bytes or more). InvalidArgument for a key
  /// that is not that.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TlsSession>> StartPsk(
      int fd, TlsSide side, std::string_view key_hex);
  /// The server end of a client's connection on `fd`, with `context`'s
  /// certificate.
  [[nodiscard]] static std::unique_ptr<TlsSession> StartServer(int fd,
                                                               const TlsServerContext& context);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  /// The handshake; `bytes` is 1 once it is done.
  [[nodiscard]] Step Handshake();
  [[nodiscard]] Step Write(std::string_view bytes);
  [[nodiscard]] Step Read(char* into, std::size_t size);
  /// Whether bytes already decrypted wait to be read: poll will not show
  /// them, so Read again before polling.
  [[nodiscard]] bool Buffered() const;
  /// After the handshake: the DNS names of the client's certificate when
  /// it showed one that the server's CA verified; empty otherwise.
  [[nodiscard]] std::vector<std::string> VerifiedPeerNames() const;

 private:
  TlsSession(SSL_CTX* context, SSL* ssl) : context_(context), ssl_(ssl) {}
  [[nodiscard]] Step Outcome(int result, std::string_view doing);

  SSL_CTX* context_ = nullptr;
  SSL* ssl_ = nullptr;
  std::string psk_;  ///< StartPsk: the key's bytes
};

}  // namespace cohort::tls
