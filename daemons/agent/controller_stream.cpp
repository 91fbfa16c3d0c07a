// SPDX-License-Identifier: Apache-2.0
#include "controller_stream.h"

#include <boost/asio/post.hpp>
#include <utility>

namespace cohort::agent {

ControllerStream::ControllerStream(boost::asio::io_context& loop, Callbacks callbacks)
    : loop_(loop), callbacks_(std::move(callbacks)) {}

std::shared_ptr<ControllerStream> ControllerStream::Open(v1::AgentGateway::Stub& stub,
                                                         boost::asio::io_context& loop,
                                                         Callbacks callbacks) {
  auto stream = std::make_shared<ControllerStream>(loop, std::move(callbacks));
  // gRPC holds a raw pointer until OnDone; the stream keeps itself alive so
  // long, whatever its owner does.
  stream->self_ = stream;
  stub.async()->Connect(&stream->context_, stream.get());
  stream->AddHold();
  stream->StartRead(&stream->incoming_);
  stream->StartCall();
  return stream;
}

void ControllerStream::Write(const v1::AgentMessage& message) {
  if (closed_) return;
  outgoing_ = message;
  StartWrite(&outgoing_);
}

void ControllerStream::Close(CloseMode mode) {
  if (closed_) return;
  closed_ = true;
  // Cancelling a call that already failed could replace the controller's
  // status (PERMISSION_DENIED and its reason) by CANCELLED.
  if (mode == CloseMode::kCancel) context_.TryCancel();
  RemoveHold();
}

void ControllerStream::OnReadDone(bool ok) {
  if (!ok) {
    boost::asio::post(loop_, [self = shared_from_this()] { self->callbacks_.on_read_failed(); });
    return;
  }
  // Post before reading on, so that messages and the failure that may follow
  // reach the loop in order.
  boost::asio::post(loop_, [self = shared_from_this(), message = std::move(incoming_)]() mutable {
    self->callbacks_.on_message(std::move(message));
  });
  incoming_.Clear();
  StartRead(&incoming_);
}

void ControllerStream::OnWriteDone(bool ok) {
  boost::asio::post(loop_, [self = shared_from_this(), ok] { self->callbacks_.on_write_done(ok); });
}

void ControllerStream::OnDone(const grpc::Status& status) {
  // The last reaction: gRPC will not touch this object again, so the loop's
  // handler may hold the last reference.
  boost::asio::post(loop_, [self = std::move(self_), status] { self->callbacks_.on_done(status); });
}

}  // namespace cohort::agent
