// SPDX-License-Identifier: Apache-2.0
// The smallest MPI program that proves a wire-up: every rank learns its rank
// and the world's size, all-reduces its rank, passes a barrier and finalizes.
// Prints "rank R/N on HOST ok sum=S" (S = 0+1+…+N-1). With MPI_TEST_ABORT=R,
// rank R calls MPI_Abort(…, 7) after the all-reduce instead.
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char host[MPI_MAX_PROCESSOR_NAME];
  int length = 0;
  MPI_Get_processor_name(host, &length);
  int sum = 0;
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  const char* abort_rank = getenv("MPI_TEST_ABORT");
  if (abort_rank != NULL && atoi(abort_rank) == rank) {
    fprintf(stderr, "rank %d aborts\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 7);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const int want = size * (size - 1) / 2;
  printf("rank %d/%d on %s %s sum=%d\n", rank, size, host, sum == want ? "ok" : "WRONG", sum);
  fflush(stdout);
  MPI_Finalize();
  return sum == want ? 0 : 1;
}
