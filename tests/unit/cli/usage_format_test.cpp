// SPDX-License-Identifier: Apache-2.0
// sacct's usage fields as Slurm writes them (AveRSS, AveCPU, TRESUsageIn*).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "format/job_format.h"
#include "format/sacct_fields.h"

namespace cohort::cli {
namespace {

TEST(UsageFormatTest, SizesAndTresListsAreSlurms) {
  EXPECT_EQ(FormatUsageSize(0), "0K");
  EXPECT_EQ(FormatUsageSize(1023), "1023K");
  EXPECT_EQ(FormatUsageSize(1536), "1.50M");
  EXPECT_EQ(FormatUsageSize(3 * 1024 * 1024), "3.00G");
  EXPECT_EQ(FormatTresUsage(61000, 2048, 0, -1), "cpu=01:01.000,mem=2.00M");
  EXPECT_EQ(FormatTresUsage(5000, 512, 40960, 87),
            "cpu=00:05.000,mem=512K,gres/gpumem=40.00G,gres/gpuutil=87");
}

TEST(UsageFormatTest, SacctShowsAStepsAveragesAndMaximaWithItsGpus) {
  const absl::StatusOr<std::vector<AccountingColumn>> columns =
      ParseAccountingFields("JobID,AveRSS,AveCPU,TRESUsageInAve,TRESUsageInMax%60");
  ASSERT_TRUE(columns.ok()) << columns.status();
  v1::Job job;
  job.set_id(12);
  job.set_display_id("12");
  v1::JobStep step;
  step.set_name("0");
  step.set_max_rss_kb(4096);
  step.set_ave_rss_kb(3072);
  step.set_total_cpu_ms(8000);
  step.set_ave_cpu_ms(2000);
  step.set_max_cpu_ms(5000);
  step.mutable_gpu()->set_util_ave_pct(40);
  step.mutable_gpu()->set_util_max_pct(97);
  step.mutable_gpu()->set_mem_ave_mb(1024);
  step.mutable_gpu()->set_mem_max_mb(2048);
  const std::vector<std::string> row = AccountingRow(*columns, job, &step, 0);
  ASSERT_EQ(row.size(), 5U);
  EXPECT_EQ(row[1], "3072K");
  EXPECT_EQ(row[2], "00:02.000");
  EXPECT_EQ(row[3], "cpu=00:02.000,mem=3.00M,gres/gpumem=1.00G,gres/gpuutil=40");
  EXPECT_EQ(row[4], "cpu=00:05.000,mem=4.00M,gres/gpumem=2.00G,gres/gpuutil=97");
  // Before any rank ended there is nothing to show; without NVML, no GPUs.
  const v1::JobStep none;
  EXPECT_EQ(AccountingRow(*columns, job, &none, 0)[3], "");
  step.clear_gpu();
  EXPECT_EQ(AccountingRow(*columns, job, &step, 0)[4], "cpu=00:05.000,mem=4.00M");
}

}  // namespace
}  // namespace cohort::cli
