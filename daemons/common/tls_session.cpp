// SPDX-License-Identifier: Apache-2.0
#include "tls_session.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>

#include <cerrno>
#include <csignal>

#include <fmt/format.h>

#include <charconv>
#include <cstring>
#include <optional>

namespace cohort::tls {
namespace {

std::string ErrorQueue() {
  std::string text;
  while (const unsigned long code = ERR_get_error()) {
    char line[256];
    ERR_error_string_n(code, line, sizeof(line));
    if (!text.empty()) text += "; ";
    text += line;
  }
  return text;
}

bool IsAddress(const std::string& host) {
  unsigned char bytes[16];
  return ::inet_pton(AF_INET, host.c_str(), bytes) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), bytes) == 1;
}

// What the client calls itself in the handshake of a step's I/O stream.
constexpr char kPskIdentity[] = "cohort-step";

// The bytes of `hex`, or nullopt for text that is not pairs of hex digits.
std::optional<std::string> FromHex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string bytes;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    unsigned value = 0;
    const auto [end, error] = std::from_chars(hex.data() + i, hex.data() + i + 2, value, 16);
    if (error != std::errc() || end != hex.data() + i + 2) return std::nullopt;
    bytes.push_back(static_cast<char>(value));
  }
  return bytes;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TlsSession>> TlsSession::StartPsk(int fd, TlsSide side,
                                                                 std::string_view key_hex) {
  std::optional<std::string> key = FromHex(key_hex);
  if (!key || key->size() < 16) {
    return absl::InvalidArgumentError(
        "the step's I/O key is not 32 or more hex digits; the controller and the agent must "
        "come from the same release as cohort");
  }
  OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr);
  SSL_CTX* context =
      SSL_CTX_new(side == TlsSide::kClient ? TLS_client_method() : TLS_server_method());
  if (context == nullptr) return absl::InternalError("TLS: " + ErrorQueue());
  // TLS 1.2: its PSK callbacks are the plain ones; 1.3 would want sessions.
  SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
  SSL_CTX_set_max_proto_version(context, TLS1_2_VERSION);
  if (SSL_CTX_set_cipher_list(context, "ECDHE-PSK-CHACHA20-POLY1305:ECDHE-PSK-AES256-CBC-SHA384") !=
      1) {
    const std::string why = ErrorQueue();
    SSL_CTX_free(context);
    return absl::InternalError("TLS: this OpenSSL has no ECDHE-PSK cipher: " + why);
  }
  SSL* ssl = SSL_new(context);
  std::unique_ptr<TlsSession> session(new TlsSession(context, ssl));
  session->psk_ = *std::move(key);
  SSL_set_app_data(ssl, session.get());
  SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_set_fd(ssl, fd);
  if (side == TlsSide::kClient) {
    SSL_set_psk_client_callback(
        ssl,
        [](SSL* s, const char*, char* identity, unsigned max_identity, unsigned char* psk,
           unsigned max_psk) -> unsigned {
          const auto* self = static_cast<const TlsSession*>(SSL_get_app_data(s));
          if (sizeof kPskIdentity > max_identity || self->psk_.size() > max_psk) return 0;
          std::memcpy(identity, kPskIdentity, sizeof kPskIdentity);
          std::memcpy(psk, self->psk_.data(), self->psk_.size());
          return static_cast<unsigned>(self->psk_.size());
        });
    SSL_set_connect_state(ssl);
  } else {
    SSL_set_psk_server_callback(
        ssl, [](SSL* s, const char* identity, unsigned char* psk, unsigned max_psk) -> unsigned {
          const auto* self = static_cast<const TlsSession*>(SSL_get_app_data(s));
          if (identity == nullptr || std::string_view(identity) != kPskIdentity ||
              self->psk_.size() > max_psk) {
            return 0;
          }
          std::memcpy(psk, self->psk_.data(), self->psk_.size());
          return static_cast<unsigned>(self->psk_.size());
        });
    SSL_set_accept_state(ssl);
  }
  return session;
}

absl::StatusOr<std::unique_ptr<TlsSession>> TlsSession::Start(int fd, const std::string& ca_file,
                                                              const std::string& host) {
  // No openssl.cnf: a command reads nothing it does not use (parsing it
  // cost every TLS command its share of a millisecond and more).
  OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr);
  SSL_CTX* context = SSL_CTX_new(TLS_client_method());
  if (context == nullptr) return absl::InternalError("TLS: " + ErrorQueue());
  SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
  SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nullptr);
  const int loaded = ca_file.empty() ? SSL_CTX_set_default_verify_paths(context)
                                     : SSL_CTX_load_verify_file(context, ca_file.c_str());
  if (loaded != 1) {
    const std::string why = ErrorQueue();
    SSL_CTX_free(context);
    return absl::InvalidArgumentError(
        fmt::format("TLSCAFile={}: cannot read CA certificates from it ({}); name the cluster's CA "
                    "certificate (PEM)",
                    ca_file, why));
  }
  SSL* ssl = SSL_new(context);
  std::unique_ptr<TlsSession> session(new TlsSession(context, ssl));
  SSL_set_fd(ssl, fd);
  static constexpr unsigned char kAlpn[] = {2, 'h', '2'};
  SSL_set_alpn_protos(ssl, kAlpn, sizeof(kAlpn));
  X509_VERIFY_PARAM* check = SSL_get0_param(ssl);
  if (IsAddress(host)) {
    X509_VERIFY_PARAM_set1_ip_asc(check, host.c_str());
  } else {
    // SSL_set_tlsext_host_name, without the macro's C cast.
    SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
             const_cast<char*>(host.c_str()));
    X509_VERIFY_PARAM_set_hostflags(check, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    SSL_set1_host(ssl, host.c_str());
  }
  SSL_set_connect_state(ssl);
  return session;
}

absl::StatusOr<std::shared_ptr<TlsServerContext>> TlsServerContext::Make(
    std::string_view certificate_chain, std::string_view private_key, std::string_view ca) {
  OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr);
  SSL_CTX* context = SSL_CTX_new(TLS_server_method());
  if (context == nullptr) return absl::InternalError("TLS: " + ErrorQueue());
  std::shared_ptr<TlsServerContext> made(new TlsServerContext(context));
  SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
  // PEM text through a memory BIO, one certificate after another.
  const auto pem = [](std::string_view text) {
    return BIO_new_mem_buf(text.data(), static_cast<int>(text.size()));
  };
  BIO* chain = pem(certificate_chain);
  X509* leaf = PEM_read_bio_X509(chain, nullptr, nullptr, nullptr);
  bool ok = leaf != nullptr && SSL_CTX_use_certificate(context, leaf) == 1;
  X509_free(leaf);
  while (ok) {
    X509* link = PEM_read_bio_X509(chain, nullptr, nullptr, nullptr);
    if (link == nullptr) break;
    ok = SSL_CTX_add_extra_chain_cert(context, link) == 1;  // takes it
    if (!ok) X509_free(link);
  }
  BIO_free(chain);
  ERR_clear_error();  // the end of the chain reads as an error
  if (!ok) return absl::InvalidArgumentError("TLSCertFile: OpenSSL refuses it: " + ErrorQueue());
  BIO* key_text = pem(private_key);
  EVP_PKEY* key = PEM_read_bio_PrivateKey(key_text, nullptr, nullptr, nullptr);
  BIO_free(key_text);
  ok = key != nullptr && SSL_CTX_use_PrivateKey(context, key) == 1 &&
       SSL_CTX_check_private_key(context) == 1;
  EVP_PKEY_free(key);
  if (!ok) {
    return absl::InvalidArgumentError(
        "TLSKeyFile: OpenSSL refuses it, or it is not the key of "
        "TLSCertFile: " +
        ErrorQueue());
  }
  if (!ca.empty()) {
    X509_STORE* store = SSL_CTX_get_cert_store(context);
    BIO* cas = pem(ca);
    int added = 0;
    while (X509* cert = PEM_read_bio_X509(cas, nullptr, nullptr, nullptr)) {
      added += X509_STORE_add_cert(store, cert);
      X509_free(cert);
    }
    BIO_free(cas);
    ERR_clear_error();
    if (added == 0) return absl::InvalidArgumentError("TLSCAFile: no certificate in it");
    // Asked for and verified when shown; a client without one proves
    // itself by MUNGE instead.
    SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nullptr);
  }
  SSL_CTX_set_alpn_select_cb(
      context,
      [](SSL*, const unsigned char** out, unsigned char* out_length, const unsigned char* in,
         unsigned in_length, void*) {
        static constexpr unsigned char kH2[] = {2, 'h', '2'};
        unsigned char* selected = nullptr;
        if (SSL_select_next_proto(&selected, out_length, kH2, sizeof(kH2), in, in_length) !=
            OPENSSL_NPN_NEGOTIATED) {
          return SSL_TLSEXT_ERR_ALERT_FATAL;
        }
        *out = selected;
        return SSL_TLSEXT_ERR_OK;
      },
      nullptr);
  return made;
}

TlsServerContext::~TlsServerContext() { SSL_CTX_free(context_); }

std::unique_ptr<TlsSession> TlsSession::StartServer(int fd, const TlsServerContext& context) {
  SSL_CTX* shared = context.Context();
  SSL_CTX_up_ref(shared);  // the session frees its reference
  SSL* ssl = SSL_new(shared);
  std::unique_ptr<TlsSession> session(new TlsSession(shared, ssl));
  SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_set_fd(ssl, fd);
  SSL_set_accept_state(ssl);
  return session;
}

std::vector<std::string> TlsSession::VerifiedPeerNames() const {
  std::vector<std::string> names;
  X509* peer = SSL_get1_peer_certificate(ssl_);
  if (peer == nullptr) return names;
  if (SSL_get_verify_result(ssl_) == X509_V_OK) {
    auto* alternatives =
        static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(peer, NID_subject_alt_name, nullptr, nullptr));
    for (int i = 0; alternatives != nullptr && i < sk_GENERAL_NAME_num(alternatives); ++i) {
      const GENERAL_NAME* name = sk_GENERAL_NAME_value(alternatives, i);
      if (name->type != GEN_DNS) continue;
      const ASN1_STRING* text = name->d.dNSName;
      names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(text)),
                         static_cast<std::size_t>(ASN1_STRING_length(text)));
    }
    GENERAL_NAMES_free(alternatives);
  }
  X509_free(peer);
  return names;
}

TlsSession::~TlsSession() {
  SSL_free(ssl_);
  SSL_CTX_free(context_);
}

TlsSession::Step TlsSession::Outcome(int result, std::string_view doing) {
  Step step;
  if (result > 0) {
    step.bytes = result;
    return step;
  }
  switch (SSL_get_error(ssl_, result)) {
    case SSL_ERROR_WANT_READ:
      step.wait = POLLIN;
      return step;
    case SSL_ERROR_WANT_WRITE:
      step.wait = POLLOUT;
      return step;
    case SSL_ERROR_ZERO_RETURN:
      return step;  // closed
    default: {
      const long verified = SSL_get_verify_result(ssl_);
      step.error = verified != X509_V_OK
                       ? fmt::format(
                             "the controller's certificate was not accepted: {}; check "
                             "TLSCAFile and that the certificate names the address "
                             "dialled",
                             X509_verify_cert_error_string(verified))
                       : fmt::format("TLS {}: {}", doing, ErrorQueue());
      if (step.error.ends_with(": ")) step.error += "the connection broke";
      return step;
    }
  }
}

namespace {

// OpenSSL writes with write(2), so a peer that closed the connection (a
// controller that died mid-call) raises SIGPIPE, which would end a command
// silently with status 141. It is blocked around each call, and one it
// raised is taken; the call fails with EPIPE, said as "the connection
// broke". A SIGPIPE pending before the call is left for its owner.
thread_local bool sigpipe_blocked_for_good = false;

template <typename Call>
int WithoutSigpipe(Call call) {
  if (sigpipe_blocked_for_good) return call();
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  sigset_t old;
  pthread_sigmask(SIG_BLOCK, &pipe, &old);
  sigset_t pending;
  sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  const int result = call();
  const int saved_errno = errno;
  sigpending(&pending);
  if (!was_pending && sigismember(&pending, SIGPIPE) == 1) {
    const timespec now{};
    while (sigtimedwait(&pipe, nullptr, &now) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = saved_errno;
  return result;
}

}  // namespace

void TlsSession::BlockSigpipeInThisThread() {
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  sigpipe_blocked_for_good = true;
}

TlsSession::Step TlsSession::Handshake() {
  return Outcome(WithoutSigpipe([this] { return SSL_do_handshake(ssl_); }), "handshake");
}

TlsSession::Step TlsSession::Write(std::string_view bytes) {
  return Outcome(
      WithoutSigpipe([&] { return SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size())); }),
      "write");
}

TlsSession::Step TlsSession::Read(char* into, std::size_t size) {
  return Outcome(WithoutSigpipe([&] { return SSL_read(ssl_, into, static_cast<int>(size)); }),
                 "read");
}

bool TlsSession::Buffered() const { return SSL_pending(ssl_) > 0; }

}  // namespace cohort::tls
