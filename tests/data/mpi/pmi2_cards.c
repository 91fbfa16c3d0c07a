// SPDX-License-Identifier: Apache-2.0
// The PMI-2 calls an MPI library built for PMI-2 (Intel MPI, MPICH
// --with-pmi=pmi2) makes as it starts, through Slurm's own client library
// (Debian's libpmi2-0-dev): init, the job's id and process mapping, a put
// of each rank's card (a ';' in it, which the wire doubles), a fence, a get
// of the next rank's card, a node attribute that the node's first rank puts
// and the node's others wait for, finalize. Prints "pmi2 rank R/N ok", or
// what failed on stderr and exits 1.
#include <slurm/pmi2.h>
#include <stdio.h>
#include <string.h>

static int fail(int rank, const char* what) {
  fprintf(stderr, "pmi2 rank %d: %s failed\n", rank, what);
  return 1;
}

int main(void) {
  int spawned = 0, size = 0, rank = 0, appnum = 0;
  if (PMI2_Init(&spawned, &size, &rank, &appnum) != PMI2_SUCCESS) return fail(-1, "PMI2_Init");
  char jobid[256];
  if (PMI2_Job_GetId(jobid, sizeof jobid) != PMI2_SUCCESS) return fail(rank, "PMI2_Job_GetId");
  char mapping[1024];
  int found = 0;
  if (PMI2_Info_GetJobAttr("PMI_process_mapping", mapping, sizeof mapping, &found) !=
          PMI2_SUCCESS ||
      !found) {
    return fail(rank, "PMI2_Info_GetJobAttr(PMI_process_mapping)");
  }
  char key[64], value[256], want[256];
  snprintf(key, sizeof key, "card-%d", rank);
  snprintf(value, sizeof value, "rank;%d", rank);
  if (PMI2_KVS_Put(key, value) != PMI2_SUCCESS) return fail(rank, "PMI2_KVS_Put");
  if (PMI2_KVS_Fence() != PMI2_SUCCESS) return fail(rank, "PMI2_KVS_Fence");
  const int next = (rank + 1) % size;
  snprintf(key, sizeof key, "card-%d", next);
  snprintf(want, sizeof want, "rank;%d", next);
  int length = 0;
  if (PMI2_KVS_Get(jobid, PMI2_ID_NULL, key, value, sizeof value, &length) != PMI2_SUCCESS ||
      strcmp(value, want) != 0) {
    return fail(rank, "PMI2_KVS_Get of the next rank's card");
  }
  // Ranks placed in blocks of `per_node`: the block's first puts.
  int first_node = 0, nodes = 0, per_node = 0;
  if (sscanf(mapping, "(vector,(%d,%d,%d))", &first_node, &nodes, &per_node) != 3 ||
      per_node < 1) {
    return fail(rank, "reading PMI_process_mapping");
  }
  const int leader = rank - rank % per_node;
  snprintf(want, sizeof want, "led by %d", leader);
  if (rank == leader) {
    if (PMI2_Info_PutNodeAttr("leader", want) != PMI2_SUCCESS) {
      return fail(rank, "PMI2_Info_PutNodeAttr");
    }
  } else if (PMI2_Info_GetNodeAttr("leader", value, sizeof value, &found, 1) != PMI2_SUCCESS ||
             !found || strcmp(value, want) != 0) {
    return fail(rank, "PMI2_Info_GetNodeAttr, waiting");
  }
  if (PMI2_Finalize() != PMI2_SUCCESS) return fail(rank, "PMI2_Finalize");
  printf("pmi2 rank %d/%d ok\n", rank, size);
  return 0;
}
