// SPDX-License-Identifier: Apache-2.0
#include "cohort/text/prometheus_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace cohort::metrics {
namespace {

TEST(PrometheusTextTest, FamiliesAndSamplesAsTheTextFormatWritesThem) {
  Exposition out;
  out.Family("cohort_jobs", MetricType::kGauge, "Jobs by state.\nOne line.");
  out.Sample("cohort_jobs", {{"state", "PENDING"}, {"partition", "gpu"}}, 3);
  out.Sample("cohort_agents_connected", {}, 16);
  out.Sample("cohort_share", {{"account", "a\"b\\c\nd"}}, 0.25);
  EXPECT_EQ(out.Take(),
            "# HELP cohort_jobs Jobs by state.\\nOne line.\n"
            "# TYPE cohort_jobs gauge\n"
            "cohort_jobs{state=\"PENDING\",partition=\"gpu\"} 3\n"
            "cohort_agents_connected 16\n"
            "cohort_share{account=\"a\\\"b\\\\c\\nd\"} 0.25\n");
  EXPECT_EQ(out.Take(), "") << "taken";
  out.Sample("x", {}, std::numeric_limits<double>::infinity());
  out.Sample("x", {}, std::nan(""));
  EXPECT_EQ(out.Take(), "x +Inf\nx NaN\n");
}

TEST(PrometheusTextTest, HistogramBucketsAreCumulative) {
  Histogram histogram({0.25, 0.5, 1});
  histogram.Observe(0.125);
  histogram.Observe(0.25);  // on a bound: counted in it (le)
  histogram.Observe(0.75);
  histogram.Observe(3);
  Exposition out;
  histogram.Write(out, "cohort_pass_seconds", {{"kind", "main"}});
  EXPECT_EQ(out.Take(),
            "cohort_pass_seconds_bucket{kind=\"main\",le=\"0.25\"} 2\n"
            "cohort_pass_seconds_bucket{kind=\"main\",le=\"0.5\"} 2\n"
            "cohort_pass_seconds_bucket{kind=\"main\",le=\"1\"} 3\n"
            "cohort_pass_seconds_bucket{kind=\"main\",le=\"+Inf\"} 4\n"
            "cohort_pass_seconds_sum{kind=\"main\"} 4.125\n"
            "cohort_pass_seconds_count{kind=\"main\"} 4\n");
  EXPECT_EQ(histogram.Count(), 4U);
}

}  // namespace
}  // namespace cohort::metrics
