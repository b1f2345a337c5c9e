/*
 * Each rank contributes rank+1 to an MPI_Allreduce (sum) and prints one line
 * with what it got back, the size of the world, and which pod it runs in:
 * MPI_TEST_POD comes from the environment that the pod's exec gives the
 * process (on a real cluster, the container's environment).
 *
 *   rank=<r> size=<n> pod=<pod> sum=<s>
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  int rank, size;
  long contribution, sum;
  const char *pod = getenv("MPI_TEST_POD");

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  contribution = rank + 1;
  MPI_Allreduce(&contribution, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  printf("rank=%d size=%d pod=%s sum=%ld\n", rank, size, pod ? pod : "-", sum);
  fflush(stdout);
  MPI_Finalize();
  return 0;
}
