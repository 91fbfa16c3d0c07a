// SPDX-License-Identifier: Apache-2.0
#include "http_server.h"

#include <fmt/format.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <utility>

namespace cohort::controller {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr std::size_t kHttpMaxConnections = 256;
constexpr std::size_t kHttpMaxHeader = 8 * 1024;
constexpr std::chrono::seconds kHttpIdle{30};

}  // namespace

struct HttpServer::Impl {
  /// What connections count on, kept alive by them: the server may be gone
  /// (`stopping`) when the last of them is destroyed with the io_context.
  struct Gate {
    std::size_t open = 0;  ///< connections
    bool stopping = false;
  };

  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  Handler handler;
  std::shared_ptr<Gate> gate = std::make_shared<Gate>();
  bool accepting = false;

  void Accept();
};

namespace {

// One connection: read a request, let the handler answer, write the
// answer, and again while the client keeps it alive.
class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket socket, HttpServer::Impl& server)
      : stream_(std::move(socket)), server_(server), gate_(server.gate) {
    ++gate_->open;
  }
  ~HttpSession() {
    --gate_->open;
    if (!gate_->stopping && !server_.accepting) server_.Accept();
  }
  HttpSession(const HttpSession&) = delete;
  HttpSession& operator=(const HttpSession&) = delete;

  void Read() {
    parser_.emplace();
    parser_->header_limit(kHttpMaxHeader);
    parser_->body_limit(0);
    stream_.expires_after(kHttpIdle);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code error, std::size_t) { self->OnRead(error); });
  }

 private:
  void OnRead(beast::error_code error) {
    if (error) {
      Close();  // the client left, went idle, or sent what is not HTTP
      return;
    }
    const auto& request = parser_->get();
    keep_alive_ = request.keep_alive();
    version_ = request.version();
    if (request.method() != http::verb::get) {
      Write({.status = 405,
             .content_type = "text/plain; charset=utf-8",
             .body = "only GET is served here\n"});
      return;
    }
    std::string path(request.target());
    path = path.substr(0, path.find('?'));
    server_.handler(path, [self = shared_from_this()](HttpAnswer answer) {
      asio::post(self->stream_.get_executor(),
                 [self, answer = std::move(answer)]() mutable { self->Write(std::move(answer)); });
    });
  }

  void Write(HttpAnswer answer) {
    response_ = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(answer.status), version_);
    response_->set(http::field::server, "cohort-controller");
    response_->set(http::field::content_type, answer.content_type);
    response_->keep_alive(keep_alive_);
    response_->body() = std::move(answer.body);
    response_->prepare_payload();
    stream_.expires_after(kHttpIdle);
    http::async_write(stream_, *response_,
                      [self = shared_from_this()](beast::error_code error, std::size_t) {
                        if (error || !self->keep_alive_) {
                          self->Close();
                          return;
                        }
                        self->Read();
                      });
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  }

  beast::tcp_stream stream_;
  HttpServer::Impl& server_;  ///< used only while the gate is open
  std::shared_ptr<HttpServer::Impl::Gate> gate_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::empty_body>> parser_;
  std::shared_ptr<http::response<http::string_body>> response_;
  bool keep_alive_ = false;
  unsigned version_ = 11;
};

}  // namespace

void HttpServer::Impl::Accept() {
  // At the limit, the next connection waits in the backlog until one closes.
  accepting = gate->open < kHttpMaxConnections;
  if (!accepting) return;
  acceptor.async_accept([this](beast::error_code error, tcp::socket socket) {
    if (gate->stopping) return;
    if (!error) std::make_shared<HttpSession>(std::move(socket), *this)->Read();
    Accept();
  });
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Listen(const std::string& address, int port,
                                                               Handler handler) {
  auto impl = std::make_unique<Impl>();
  impl->handler = std::move(handler);
  beast::error_code error;
  tcp::resolver resolver(impl->io);
  const auto found =
      resolver.resolve(address, std::to_string(port),
                       tcp::resolver::passive | tcp::resolver::numeric_service, error);
  if (error || found.empty()) {
    return absl::InvalidArgumentError(fmt::format(
        "cannot listen for HTTP on {}: {}; set ControllerAddr to an address of this host", address,
        error ? error.message() : "no address"));
  }
  const tcp::endpoint endpoint = found.begin()->endpoint();
  impl->acceptor.open(endpoint.protocol(), error);
  if (!error) impl->acceptor.set_option(asio::socket_base::reuse_address(true), error);
  if (!error) impl->acceptor.bind(endpoint, error);
  if (!error) impl->acceptor.listen(asio::socket_base::max_listen_connections, error);
  if (error) {
    return absl::UnavailableError(fmt::format(
        "cannot listen for HTTP on {}:{}: {}; pick another HttpPort, or 0 for any free port",
        address, port, error.message()));
  }
  std::unique_ptr<HttpServer> server(new HttpServer(std::move(impl)));
  return server;
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  port_ = impl_->acceptor.local_endpoint().port();
  impl_->Accept();
  thread_ = std::thread([this] { impl_->io.run(); });
}

HttpServer::~HttpServer() {
  asio::post(impl_->io, [impl = impl_.get()] {
    impl->gate->stopping = true;
    beast::error_code ignored;
    impl->acceptor.close(ignored);
    impl->io.stop();
  });
  thread_.join();
  // Connections still open are destroyed with the io_context; the gate
  // tells them the server is gone.
}

}  // namespace cohort::controller
