// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

/// The daemons' HTTP endpoint (Boost.Beast): the controller's dashboard,
/// metrics and REST API, an agent's metrics: HTTP/1.1 with keep-alive,
/// over TLS when given a certificate, on a thread of its own. Hands each
/// request to a handler that answers when it can (from any thread).
/// Requests are bounded (8 KiB of headers, 1 MiB of body), idle
/// connections close after 30 s, a TLS handshake not done in 5 s ends its
/// connection, and at most 256 connections are open at once (past that the
/// server stops accepting until one closes). One client address holds at
/// most 32 of them, and at most 8 in their TLS handshake; past that its
/// new connections are closed at once, so that one client cannot keep the
/// others out. Out of descriptors, the server closes the connection at the
/// head of its queue and goes on.
namespace cohort::http {

inline constexpr std::size_t kMaxConnections = 256;
inline constexpr std::size_t kMaxConnectionsPerSource = 32;
inline constexpr std::size_t kMaxHandshakesPerSource = 8;
inline constexpr std::chrono::seconds kHandshakeTimeout{5};

/// What the handler is given of a request.
struct HttpRequest {
  std::string method;  ///< GET, POST, DELETE, ...
  std::string path;    ///< the target up to '?', as sent (not decoded)
  std::string query;   ///< after '?'; empty: none
  std::string body;
  std::string authorization;  ///< the Authorization header
  std::string munge;          ///< the X-Cohort-Munge header: a MUNGE credential
};

/// What a handler answers: an HTTP status, a content type and a body.
struct HttpAnswer {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::string cache_control;  ///< empty: none sent
};

/// The server's certificate chain and key, PEM: HTTPS instead of HTTP.
struct HttpTls {
  std::string certificate_chain;
  std::string private_key;
};

class HttpServer {
 public:
  /// Called with each request; answers through `answer`, once, from any
  /// thread.
  using Handler = std::function<void(HttpRequest request, std::function<void(HttpAnswer)> answer)>;

  /// Listens on `address`:`port` (0: any free port), with TLS when `tls`
  /// is given, and starts the thread. The errno's status, naming the
  /// address, when it cannot listen; InvalidArgument when OpenSSL refuses
  /// the certificate or key.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<HttpServer>> Listen(
      const std::string& address, int port, Handler handler,
      const std::optional<HttpTls>& tls = std::nullopt);
  /// Stops accepting and joins the thread; idempotent. Answers given
  /// after it are dropped with their connections when the server is
  /// destroyed: a daemon stops the server, then runs what its own loop
  /// still holds (answers among them), then destroys the server.
  void Stop();
  /// Stop(), then closes every connection.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  [[nodiscard]] int Port() const { return port_; }

  /// Connections the server closed at once: for want of a descriptor
  /// (shed), and because their address was at its bound (refused).
  struct Counts {
    std::uint64_t shed = 0;
    std::uint64_t refused = 0;
  };
  /// Since Listen; any thread.
  [[nodiscard]] Counts Counted() const;

  /// The acceptor and its thread's io_context (http_server.cpp).
  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace cohort::http
