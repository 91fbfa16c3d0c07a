// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

/// The controller's HTTP endpoint (Boost.Beast): HTTP/1.1 with keep-alive
/// on a thread of its own. Serves GET requests by path through a handler
/// that answers when it can (from any thread). Requests are bounded (8 KiB
/// of headers, no body), idle connections close after 30 s, and at most
/// 256 connections are open at once; past that the server stops accepting
/// until one closes.
namespace cohort::controller {

/// What a handler answers: an HTTP status, a content type and a body.
struct HttpAnswer {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class HttpServer {
 public:
  /// Called with each request's path (without the query); answers through
  /// `answer`, once, from any thread.
  using Handler =
      std::function<void(const std::string& path, std::function<void(HttpAnswer)> answer)>;

  /// Listens on `address`:`port` (0: any free port) and starts the thread.
  /// The errno's status, naming the address, when it cannot listen.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<HttpServer>> Listen(
      const std::string& address, int port, Handler handler);
  /// Stops accepting, closes every connection and joins the thread.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  [[nodiscard]] int Port() const { return port_; }

  /// The acceptor and its thread's io_context (http_server.cpp).
  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace cohort::controller
