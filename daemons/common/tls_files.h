// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cohort/config/cluster_config.h"

/// The controller's TLS files (TLSCertFile, TLSKeyFile, TLSCAFile), checked
/// with OpenSSL before anything serves with them: a cluster whose clients
/// cannot verify the controller is found at `cohort config check`, not at
/// the first failed handshake.
namespace cohort::shell {

/// What `cohort config check` and the controller's start say of them.
struct TlsReport {
  std::vector<std::string> errors;  ///< each names the file and the fix
  std::string summary;              ///< subject, names and expiry of the certificate, when it reads
};

/// Reads and checks the files `config` names, when TLS is on: each file
/// reads and parses, the key is the certificate's, the certificate is valid
/// now and, with TLSCAFile, the CA verifies it.
[[nodiscard]] TlsReport CheckTlsFiles(const config::ClusterConfig& config);

/// A whole PEM file, or the error naming it.
[[nodiscard]] absl::StatusOr<std::string> ReadPem(const std::string& path, std::string_view key);

}  // namespace cohort::shell
