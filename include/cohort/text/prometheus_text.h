// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

/// Prometheus' text exposition format (version 0.0.4), as a scrape of
/// `/metrics` reads it: families of samples, each family introduced by its
/// HELP and TYPE lines, and histograms with cumulative buckets. Pure; one
/// instance per thread.
namespace cohort::metrics {

/// A sample's labels, in the order they are written: name, value.
using Labels = std::vector<std::pair<std::string_view, std::string>>;

enum class MetricType { kCounter, kGauge, kHistogram };

class Exposition {
 public:
  /// Starts a family: `# HELP name help` and `# TYPE name type`. Its
  /// samples follow. `help` may hold any text (escaped here).
  void Family(std::string_view name, MetricType type, std::string_view help);
  /// `name{labels} value`. Label values may hold any text (escaped here);
  /// values print as integers when they are whole, `+Inf`, `-Inf` and `NaN`
  /// as Prometheus spells them.
  void Sample(std::string_view name, const Labels& labels, double value);
  /// The text so far, ending with a newline; the exposition starts empty
  /// again.
  [[nodiscard]] std::string Take();

 private:
  std::string text_;
};

/// A histogram with fixed upper bounds (ascending, +Inf implied).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  /// `name_bucket{labels…,le="…"}` for each bound and +Inf (cumulative),
  /// `name_sum` and `name_count`. The family line is the caller's.
  void Write(Exposition& out, std::string_view name, const Labels& labels) const;
  [[nodiscard]] std::uint64_t Count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  ///< per bound, not cumulative; then +Inf
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

/// Bounds for durations in seconds, 100 µs to 10 s: what a scheduling pass,
/// an RPC and a commit take.
[[nodiscard]] std::vector<double> DurationBounds();

}  // namespace cohort::metrics
