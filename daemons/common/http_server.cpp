// SPDX-License-Identifier: Apache-2.0
#include "http_server.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

namespace cohort::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

constexpr std::size_t kHttpMaxHeader = 8 * 1024;
constexpr std::size_t kHttpMaxBody = 1024 * 1024;
constexpr std::chrono::seconds kHttpIdle{30};

}  // namespace

struct HttpServer::Impl {
  /// What connections count on, kept alive by them: the server may be gone
  /// (`stopping`) when the last of them is destroyed with the io_context.
  struct Gate {
    std::size_t open = 0;  ///< connections
    /// Connections open, and of them still in their TLS handshake, by the
    /// client's address.
    struct Source {
      std::size_t open = 0;
      std::size_t handshaking = 0;
    };
    std::map<asio::ip::address, Source> sources;
    bool stopping = false;
  };

  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  Handler handler;
  std::optional<ssl::context> tls;  ///< HTTPS when set
  std::shared_ptr<Gate> gate = std::make_shared<Gate>();
  bool accepting = false;
  asio::steady_timer retry{io};
  int spare_fd = -1;  ///< given up to accept-and-close when out of descriptors
  std::atomic<std::uint64_t> shed{0};
  std::atomic<std::uint64_t> refused{0};

  void Accept();
  /// Out of descriptors: the connection at the head of the queue is taken
  /// on the spare descriptor and closed, then Accept goes on.
  void Shed();
  /// Starts a session for `socket`, or closes it when its address is at
  /// its bound.
  void Admit(tcp::socket socket);
};

namespace {

// One connection over `Stream` (a TCP stream, or TLS over one): read a
// request, let the handler answer, write the answer, and again while the
// client keeps it alive.
template <typename Stream>
class HttpSession : public std::enable_shared_from_this<HttpSession<Stream>> {
 public:
  template <typename... StreamArgs>
  HttpSession(HttpServer::Impl& server, asio::ip::address source, StreamArgs&&... stream_args)
      : stream_(std::forward<StreamArgs>(stream_args)...),
        server_(server),
        gate_(server.gate),
        source_(source) {
    ++gate_->open;
    ++gate_->sources[source_].open;
  }
  ~HttpSession() {
    --gate_->open;
    EndHandshake();
    if (--gate_->sources[source_].open == 0) gate_->sources.erase(source_);
    if (!gate_->stopping && !server_.accepting) server_.Accept();
  }
  HttpSession(const HttpSession&) = delete;
  HttpSession& operator=(const HttpSession&) = delete;

  void Start() {
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      Read();
    } else {
      // A handshake has less time than a request: a client that never
      // finishes one holds a slot of its address's few.
      handshaking_ = true;
      ++gate_->sources[source_].handshaking;
      beast::get_lowest_layer(stream_).expires_after(kHandshakeTimeout);
      stream_.async_handshake(ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code error) {
                                self->EndHandshake();
                                if (error) {
                                  self->Close();  // not TLS, or a client that refused us
                                  return;
                                }
                                self->Read();
                              });
    }
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->header_limit(kHttpMaxHeader);
    parser_->body_limit(kHttpMaxBody);
    beast::get_lowest_layer(stream_).expires_after(kHttpIdle);
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = this->shared_from_this()](beast::error_code error, std::size_t) {
                        self->OnRead(error);
                      });
  }

  void OnRead(beast::error_code error) {
    if (error == bhttp::error::body_limit || error == bhttp::error::header_limit) {
      keep_alive_ = false;
      Write({.status = 413,
             .content_type = "text/plain; charset=utf-8",
             .body = fmt::format("the request is too large: at most {} bytes of headers and {} "
                                 "of body are read\n",
                                 kHttpMaxHeader, kHttpMaxBody),
             .cache_control = ""});
      return;
    }
    if (error) {
      Close();  // the client left, went idle, or sent what is not HTTP
      return;
    }
    auto& request = parser_->get();
    keep_alive_ = request.keep_alive();
    version_ = request.version();
    HttpRequest out;
    out.method = std::string(request.method_string());
    const std::string_view target(request.target().data(), request.target().size());
    const std::size_t question = target.find('?');
    out.path = std::string(target.substr(0, question));
    if (question != std::string_view::npos) out.query = std::string(target.substr(question + 1));
    out.body = std::move(request.body());
    out.authorization = std::string(request[bhttp::field::authorization]);
    out.munge = std::string(request["X-Cohort-Munge"]);
    server_.handler(std::move(out), [self = this->shared_from_this()](HttpAnswer answer) {
      asio::post(self->stream_.get_executor(),
                 [self, answer = std::move(answer)]() mutable { self->Write(std::move(answer)); });
    });
  }

  void Write(HttpAnswer answer) {
    response_ = std::make_shared<bhttp::response<bhttp::string_body>>(
        static_cast<bhttp::status>(answer.status), version_);
    response_->set(bhttp::field::server, "cohort");
    response_->set(bhttp::field::content_type, answer.content_type);
    if (!answer.cache_control.empty()) {
      response_->set(bhttp::field::cache_control, answer.cache_control);
    }
    if (answer.status == 401) response_->set(bhttp::field::www_authenticate, "Bearer");
    response_->keep_alive(keep_alive_);
    response_->body() = std::move(answer.body);
    response_->prepare_payload();
    beast::get_lowest_layer(stream_).expires_after(kHttpIdle);
    bhttp::async_write(stream_, *response_,
                       [self = this->shared_from_this()](beast::error_code error, std::size_t) {
                         if (error || !self->keep_alive_) {
                           self->Close();
                           return;
                         }
                         self->Read();
                       });
  }

  void EndHandshake() {
    if (!handshaking_) return;
    handshaking_ = false;
    --gate_->sources[source_].handshaking;
  }

  void Close() {
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().shutdown(tcp::socket::shutdown_both, ignored);
  }

  Stream stream_;
  HttpServer::Impl& server_;  ///< used only while the gate is open
  std::shared_ptr<HttpServer::Impl::Gate> gate_;
  const asio::ip::address source_;
  bool handshaking_ = false;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::shared_ptr<bhttp::response<bhttp::string_body>> response_;
  bool keep_alive_ = false;
  unsigned version_ = 11;
};

}  // namespace

void HttpServer::Impl::Accept() {
  // At the limit, the next connection waits in the backlog until one closes.
  accepting = gate->open < kMaxConnections;
  if (!accepting) return;
  acceptor.async_accept([this](beast::error_code error, tcp::socket socket) {
    if (gate->stopping) return;
    if (error == asio::error::no_descriptors || error.value() == ENFILE) {
      Shed();
      return;
    }
    if (error && error != asio::error::connection_aborted) {
      // Out of memory or buffers: try again shortly rather than spin.
      accepting = true;
      retry.expires_after(std::chrono::milliseconds(10));
      retry.async_wait([this](beast::error_code stopped) {
        if (!stopped && !gate->stopping) Accept();
      });
      return;
    }
    if (!error) Admit(std::move(socket));
    Accept();
  });
}

void HttpServer::Impl::Admit(tcp::socket socket) {
  beast::error_code error;
  const tcp::endpoint peer = socket.remote_endpoint(error);
  if (error) return;  // gone already
  const asio::ip::address source = peer.address();
  const auto it = gate->sources.find(source);
  if (it != gate->sources.end() && (it->second.open >= kMaxConnectionsPerSource ||
                                    (tls && it->second.handshaking >= kMaxHandshakesPerSource))) {
    ++refused;
    socket.close(error);
    return;
  }
  if (tls) {
    std::make_shared<HttpSession<beast::ssl_stream<beast::tcp_stream>>>(*this, source,
                                                                        std::move(socket), *tls)
        ->Start();
  } else {
    std::make_shared<HttpSession<beast::tcp_stream>>(*this, source, std::move(socket))->Start();
  }
}

void HttpServer::Impl::Shed() {
  ++shed;
  if (spare_fd >= 0) {
    ::close(spare_fd);
    const int fd = ::accept4(acceptor.native_handle(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) ::close(fd);
    spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  // Again at once when the spare drained one, else after a moment.
  accepting = true;
  retry.expires_after(std::chrono::milliseconds(spare_fd >= 0 ? 0 : 10));
  retry.async_wait([this](beast::error_code stopped) {
    if (!stopped && !gate->stopping) Accept();
  });
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Listen(const std::string& address, int port,
                                                               Handler handler,
                                                               const std::optional<HttpTls>& tls) {
  auto impl = std::make_unique<Impl>();
  impl->handler = std::move(handler);
  beast::error_code error;
  if (tls) {
    impl->tls.emplace(ssl::context::tls_server);
    impl->tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                           ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                           ssl::context::no_tlsv1_1);
    impl->tls->use_certificate_chain(asio::buffer(tls->certificate_chain), error);
    if (!error)
      impl->tls->use_private_key(asio::buffer(tls->private_key), ssl::context::pem, error);
    if (error) {
      return absl::InvalidArgumentError(fmt::format(
          "cannot serve HTTPS: {}; check TLSCertFile and TLSKeyFile with: cohort config check",
          error.message()));
    }
  }
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
  impl_->spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  impl_->Accept();
  thread_ = std::thread([this] { impl_->io.run(); });
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (!thread_.joinable()) return;
  asio::post(impl_->io, [impl = impl_.get()] {
    impl->gate->stopping = true;
    beast::error_code ignored;
    impl->acceptor.close(ignored);
    impl->retry.cancel();
    impl->io.stop();
  });
  thread_.join();
  if (impl_->spare_fd >= 0) ::close(impl_->spare_fd);
  impl_->spare_fd = -1;
  // Connections still open are destroyed with the io_context; the gate
  // tells them the server is gone.
}

HttpServer::Counts HttpServer::Counted() const {
  return {.shed = impl_->shed, .refused = impl_->refused};
}

}  // namespace cohort::http
