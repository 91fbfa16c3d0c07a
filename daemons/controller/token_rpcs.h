// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>

#include <boost/asio/io_context.hpp>

#include "api_token.h"
#include "cohort/v1/cohort.pb.h"
#include "wire.h"
#include "worker.h"

namespace cohort::controller {

/// The Controller service's call that issues REST API tokens (`cohort
/// token`, as `scontrol token`). On the state thread (io()); reads no
/// scheduler state. Errors: PermissionDenied (anonymous callers, token
/// holders asking for another, users asking for someone else),
/// InvalidArgument (a lifespan out of range), FailedPrecondition (a
/// controller without a token key).
class TokenRpcs {
 public:
  /// The lifespan of a token when the caller names none, as Slurm's.
  static constexpr std::chrono::seconds kDefaultLifespan{1800};

  TokenRpcs(boost::asio::io_context& state_io, std::optional<TokenSigner> signer)
      : io_(state_io), signer_(std::move(signer)) {}

  /// Where the calls run: the state thread.
  boost::asio::io_context& io() { return io_; }

  void IssueToken(v1::IssueTokenRequest& request, const Identity& who,
                  Reply<v1::IssueTokenResponse> reply);

 private:
  boost::asio::io_context& io_;
  std::optional<TokenSigner> signer_;
};

}  // namespace cohort::controller
