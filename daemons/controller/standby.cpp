// SPDX-License-Identifier: Apache-2.0
#include "standby.h"

#include <csignal>
#include <fstream>

#include <fmt/format.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "cohort/config/controller_addrs.h"
#include "cohort/fmt_absl.h"
#include "controller_log.h"
#include "log_file.h"
#include "rpc/local_socket.h"
#include "rpc/rpc_limits.h"

namespace cohort::controller {
namespace {

constexpr std::chrono::milliseconds kPollInterval{100};

// Every call of every method, refused with the way to the active one.
class Redirect final : public grpc::CallbackGenericService {
 public:
  explicit Redirect(const Leadership& leadership) : leadership_(leadership) {}

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* /*context*/) override {
    class Refuse final : public grpc::ServerGenericBidiReactor {
     public:
      explicit Refuse(const std::string& message) {
        Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, message));
      }
      void OnDone() override { delete this; }
    };
    return new Refuse(config::NotActiveMessage(leadership_.Active()));
  }

 private:
  const Leadership& leadership_;
};

}  // namespace

absl::StatusOr<StandbyEnd> RunStandby(const StandbyPlace& place, Leadership& leadership) {
  Redirect redirect(leadership);
  LocalSocket local;
  PeerBook peers;  // the redirect answers everyone alike
  if (absl::Status s = local.Listen(place.socket_path); !s.ok()) return s;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(place.address, place.credentials, &port);
  LimitRpcServer(builder);
  builder.RegisterCallbackGenericService(&redirect);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(fmt::format(
        "cannot listen on {}; is another controller running on this host? (set ControllerPort, "
        "or --port 0 for any free port)",
        place.address));
  }
  H2Guard guard(server.get(), peers, nullptr);
  local.Serve(guard);
  leadership.SetAddress(place.advertise(port));

  StandbyEnd end{.why = StandbyEnd::Why::kStopped, .port = port};
  boost::asio::io_context io;
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.add(SIGHUP);
  signals.add(SIGUSR2);
  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& error, int signal) {
        if (error) return;
        if (signal == SIGUSR2) {
          ReopenLogFile();
          signals.async_wait(on_signal);
          return;
        }
        end.why = signal == SIGHUP ? StandbyEnd::Why::kReload : StandbyEnd::Why::kStopped;
        io.stop();
      };
  signals.async_wait(on_signal);

  boost::asio::steady_timer timer(io);
  std::string seen_active = "-";
  std::string seen_error;
  std::function<void()> poll = [&] {
    absl::StatusOr<std::optional<std::int64_t>> tried = leadership.TryAcquire();
    if (tried.ok() && tried->has_value()) {
      end.why = StandbyEnd::Why::kAcquired;
      io.stop();
      return;
    }
    if (!tried.ok()) {
      // The database may be restarting: say so once, and keep trying.
      if (std::string error(tried.status().message()); error != seen_error) {
        Log("leader")->warn("standby_cannot_reach_database reason=\"{}\"", error);
        seen_error = std::move(error);
      }
    } else if (std::string active = leadership.Active(); active != seen_active) {
      Log("leader")->info("standby active={}", active.empty() ? "none" : active);
      seen_active = std::move(active);
      seen_error.clear();
    }
    timer.expires_after(kPollInterval);
    timer.async_wait([&](const boost::system::error_code& error) {
      if (!error) poll();
    });
  };
  poll();
  // Announced (the port file, the log line) once the first look at the
  // lease has learnt the active controller, so that whoever it brings here
  // is told where that one is, not that none is active.
  if (end.why != StandbyEnd::Why::kAcquired) {
    if (!place.port_file.empty()) std::ofstream(place.port_file) << port << '\n';
    Log("leader")->info("controller_standby listen={} socket={}", place.address, place.socket_path);
  }
  io.run();

  local.Stop();
  guard.Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
  return end;
}

}  // namespace cohort::controller
