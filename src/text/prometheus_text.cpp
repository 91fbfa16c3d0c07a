// SPDX-License-Identifier: Apache-2.0
#include "cohort/text/prometheus_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace cohort::metrics {
namespace {

// Label values escape backslash, double quote and newline; HELP text
// backslash and newline.
std::string Escape(std::string_view text, bool quotes) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quotes) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    return fmt::format("{}", static_cast<long long>(value));
  }
  return fmt::format("{}", value);
}

std::string_view TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

void Exposition::Family(std::string_view name, MetricType type, std::string_view help) {
  text_ +=
      fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, Escape(help, false), name, TypeName(type));
}

void Exposition::Sample(std::string_view name, const Labels& labels, double value) {
  text_ += name;
  if (!labels.empty()) {
    text_ += '{';
    for (std::size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) text_ += ',';
      text_ += fmt::format("{}=\"{}\"", labels[i].first, Escape(labels[i].second, true));
    }
    text_ += '}';
  }
  text_ += fmt::format(" {}\n", Number(value));
}

std::string Exposition::Take() {
  std::string out = std::move(text_);
  text_.clear();
  return out;
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  const auto at = std::lower_bound(bounds_.begin(), bounds_.end(), value);
  ++counts_[static_cast<std::size_t>(at - bounds_.begin())];
  sum_ += value;
  ++count_;
}

void Histogram::Write(Exposition& out, std::string_view name, const Labels& labels) const {
  const std::string bucket = fmt::format("{}_bucket", name);
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    Labels with = labels;
    with.emplace_back("le", i < bounds_.size() ? Number(bounds_[i]) : "+Inf");
    out.Sample(bucket, with, static_cast<double>(cumulative));
  }
  out.Sample(fmt::format("{}_sum", name), labels, sum_);
  out.Sample(fmt::format("{}_count", name), labels, static_cast<double>(count_));
}

std::vector<double> DurationBounds() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
}

}  // namespace cohort::metrics
