// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <grpcpp/client_context.h>
#include <grpcpp/support/client_callback.h>
#include <grpcpp/support/status.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>

#include "cohort/v1/cohort.grpc.pb.h"

/// One AgentGateway.Connect call: the gRPC side of a node's stream.
namespace cohort::agent {

/// How a stream is ended by its owner.
enum class CloseMode {
  kFinished,  ///< the call already failed (a read or write said so): keep its status
  kCancel,    ///< the agent is leaving: cancel the call
};

/// A gRPC callback reactor for one Connect call. gRPC runs its reactions on
/// its own threads; each reaction only posts what happened to the agent's
/// loop, where the owner's callbacks run. The owner calls Write and Close
/// from the loop only. A hold keeps the call from finishing until the owner
/// Closes it, so a Write from the loop can never race the call's end: after
/// Close the owner must not Write again. The stream owns itself until its
/// final callback (`on_done`) has run on the loop.
class ControllerStream final
    : public grpc::ClientBidiReactor<v1::AgentMessage, v1::ControllerMessage>,
      public std::enable_shared_from_this<ControllerStream> {
 public:
  /// What the stream reports, each on the loop, in the order it happened.
  struct Callbacks {
    std::function<void(v1::ControllerMessage)> on_message;
    std::function<void(bool ok)> on_write_done;  ///< !ok: the call is broken
    std::function<void()> on_read_failed;        ///< the controller ended the call or it broke
    std::function<void(const grpc::Status&)> on_done;  ///< last; the status says why
  };

  /// Starts the call: a read is always outstanding from now on.
  [[nodiscard]] static std::shared_ptr<ControllerStream> Open(v1::AgentGateway::Stub& stub,
                                                              boost::asio::io_context& loop,
                                                              Callbacks callbacks);

  /// Sends one message. At most one write may be outstanding: wait for
  /// on_write_done. Loop thread; never after Close.
  void Write(const v1::AgentMessage& message);

  /// Lets the call finish (on_done follows once outstanding operations end).
  /// Loop thread; idempotent.
  void Close(CloseMode mode);

  /// Public for make_shared only; use Open.
  ControllerStream(boost::asio::io_context& loop, Callbacks callbacks);

 private:
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

  boost::asio::io_context& loop_;
  Callbacks callbacks_;
  grpc::ClientContext context_;
  v1::ControllerMessage incoming_;
  v1::AgentMessage outgoing_;
  bool closed_ = false;                     // loop thread only
  std::shared_ptr<ControllerStream> self_;  // set by Open, released by OnDone
};

}  // namespace cohort::agent
