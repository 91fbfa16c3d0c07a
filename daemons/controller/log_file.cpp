// SPDX-License-Identifier: Apache-2.0
#include "log_file.h"

#include <memory>
#include <mutex>

#include <fmt/format.h>
#include <spdlog/details/file_helper.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

namespace cohort::controller {
namespace {

// A file sink that can be reopened under its own lock.
class ReopenableFileSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit ReopenableFileSink(const std::string& path) { file_.open(path, /*truncate=*/false); }

  void Reopen() {
    const std::lock_guard lock(mutex_);
    file_.reopen(/*truncate=*/false);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& message) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(message, formatted);
    file_.write(formatted);
    file_.flush();  // a line is on disk when the event happened, as on stderr
  }
  void flush_() override { file_.flush(); }

 private:
  spdlog::details::file_helper file_;
};

std::shared_ptr<ReopenableFileSink>& TheSink() {
  static std::shared_ptr<ReopenableFileSink> sink;
  return sink;
}

}  // namespace

absl::Status LogToFile(const std::string& path) {
  std::shared_ptr<ReopenableFileSink> sink;
  try {
    sink = std::make_shared<ReopenableFileSink>(path);
  } catch (const spdlog::spdlog_ex& error) {
    return absl::FailedPreconditionError(fmt::format(
        "cannot open LogFile {}: {}; make its folder writable by the controller, or leave LogFile "
        "out to log to stderr",
        path, error.what()));
  }
  const std::shared_ptr<spdlog::logger> current = spdlog::default_logger();
  auto logger = std::make_shared<spdlog::logger>(current->name(), sink);
  logger->set_level(current->level());
  spdlog::set_default_logger(logger);
  TheSink() = std::move(sink);
  return absl::OkStatus();
}

void ReopenLogFile() {
  if (const std::shared_ptr<ReopenableFileSink>& sink = TheSink()) {
    try {
      sink->Reopen();
    } catch (const spdlog::spdlog_ex& error) {
      // Keep logging to the file still open; say why on stderr.
      fmt::print(stderr, "cohort-controller: cannot reopen the log file: {}\n", error.what());
    }
  }
}

}  // namespace cohort::controller
