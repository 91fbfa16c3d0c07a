// SPDX-License-Identifier: Apache-2.0
#include "tls_files.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cluster_files.h"

namespace cohort::shell {
namespace {

template <auto kFree>
struct Freer {
  template <typename T>
  void operator()(T* p) const {
    kFree(p);
  }
};
using Bio = std::unique_ptr<BIO, Freer<&BIO_free>>;
using Certificate = std::unique_ptr<X509, Freer<&X509_free>>;
using Key = std::unique_ptr<EVP_PKEY, Freer<&EVP_PKEY_free>>;
using Store = std::unique_ptr<X509_STORE, Freer<&X509_STORE_free>>;
using StoreContext = std::unique_ptr<X509_STORE_CTX, Freer<&X509_STORE_CTX_free>>;

std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "not PEM";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

Bio MemoryOf(const std::string& text) {
  return Bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

std::string Names(X509* certificate) {
  std::vector<std::string> names;
  auto* alt = static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(certificate, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; alt != nullptr && i < sk_GENERAL_NAME_num(alt); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(alt, i);
    if (name->type == GEN_DNS) {
      const ASN1_STRING* dns = name->d.dNSName;
      names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(dns)),
                         static_cast<std::size_t>(ASN1_STRING_length(dns)));
    } else if (name->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* ip = name->d.iPAddress;
      if (ASN1_STRING_length(ip) == 4) {
        const unsigned char* b = ASN1_STRING_get0_data(ip);
        names.push_back(fmt::format("{}.{}.{}.{}", b[0], b[1], b[2], b[3]));
      } else {
        names.emplace_back("an IPv6 address");
      }
    }
  }
  GENERAL_NAMES_free(alt);
  return names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ","));
}

std::string NotAfter(X509* certificate) {
  Bio out(BIO_new(BIO_s_mem()));
  ASN1_TIME_print(out.get(), X509_get0_notAfter(certificate));
  char* data = nullptr;
  const long size = BIO_get_mem_data(out.get(), &data);
  return std::string(data, static_cast<std::size_t>(size));
}

}  // namespace

absl::StatusOr<std::string> ReadPem(const std::string& path, std::string_view key) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("{}={}: {}", key, path, std::string(text.status().message())));
  }
  return text;
}

TlsReport CheckTlsFiles(const config::ClusterConfig& config) {
  TlsReport report;
  if (!config.TlsOn()) return report;
  auto error = [&](std::string text) { report.errors.push_back(std::move(text)); };
  absl::StatusOr<std::string> cert_pem = ReadPem(config.tls_cert_file, "TLSCertFile");
  absl::StatusOr<std::string> key_pem = ReadPem(config.tls_key_file, "TLSKeyFile");
  Certificate certificate;
  if (!cert_pem.ok()) {
    error(std::string(cert_pem.status().message()));
  } else {
    Bio bio = MemoryOf(*cert_pem);
    certificate.reset(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (certificate == nullptr) {
      error(
          fmt::format("TLSCertFile={}: not a PEM certificate ({}); give the controller's "
                      "certificate, -----BEGIN CERTIFICATE----- first",
                      config.tls_cert_file, OpenSslError()));
    }
  }
  Key key;
  if (!key_pem.ok()) {
    error(std::string(key_pem.status().message()));
  } else {
    Bio bio = MemoryOf(*key_pem);
    key.reset(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
    if (key == nullptr) {
      error(fmt::format("TLSKeyFile={}: not a PEM private key without a passphrase ({})",
                        config.tls_key_file, OpenSslError()));
    }
  }
  if (certificate == nullptr) return report;
  report.summary = fmt::format("certificate for {} until {}", Names(certificate.get()),
                               NotAfter(certificate.get()));
  if (key != nullptr && X509_check_private_key(certificate.get(), key.get()) != 1) {
    ERR_clear_error();
    error(
        fmt::format("TLSKeyFile={} is not the key of TLSCertFile={}; give the key the "
                    "certificate was made for",
                    config.tls_key_file, config.tls_cert_file));
  }
  if (X509_cmp_current_time(X509_get0_notAfter(certificate.get())) <= 0) {
    error(fmt::format("TLSCertFile={} expired on {}; make a new one (docs/operations.md#tls)",
                      config.tls_cert_file, NotAfter(certificate.get())));
  } else if (X509_cmp_current_time(X509_get0_notBefore(certificate.get())) >= 0) {
    error(fmt::format("TLSCertFile={} is not valid yet; check the clocks of the hosts",
                      config.tls_cert_file));
  }
  if (config.tls_ca_file.empty()) return report;
  Store store(X509_STORE_new());
  if (X509_STORE_load_file(store.get(), config.tls_ca_file.c_str()) != 1) {
    error(fmt::format("TLSCAFile={}: cannot read CA certificates from it ({})", config.tls_ca_file,
                      OpenSslError()));
    return report;
  }
  // The chain after the certificate in TLSCertFile, as the controller sends it.
  STACK_OF(X509)* chain = sk_X509_new_null();
  Bio bio = MemoryOf(*cert_pem);
  Certificate skipped(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  while (X509* more = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    sk_X509_push(chain, more);
  }
  ERR_clear_error();
  StoreContext context(X509_STORE_CTX_new());
  X509_STORE_CTX_init(context.get(), store.get(), certificate.get(), chain);
  if (X509_verify_cert(context.get()) != 1) {
    error(
        fmt::format("TLSCAFile={} does not verify TLSCertFile={}: {}; sign the certificate "
                    "with the cluster's CA, or name that CA",
                    config.tls_ca_file, config.tls_cert_file,
                    X509_verify_cert_error_string(X509_STORE_CTX_get_error(context.get()))));
  }
  sk_X509_pop_free(chain, X509_free);
  ERR_clear_error();
  return report;
}

}  // namespace cohort::shell
