/* The real-peer baseline: MPI_Allreduce (sum of floats) time per call, slowest rank's mean. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long n = argc > 1 ? atol(argv[1]) : 4194304;
  const int rounds = argc > 2 ? atoi(argv[2]) : 10;
  float* x = malloc(sizeof(float) * n);
  float* y = malloc(sizeof(float) * n);
  for (long i = 0; i < n; ++i) x[i] = (float)rank;
  for (int k = 0; k < 3; ++k) MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int k = 0; k < rounds; ++k) MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double mine = (MPI_Wtime() - t0) / rounds, worst;
  MPI_Reduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("mpi_allreduce n %d floats %ld seconds_per_round %.6f\n", size, n, worst);
  free(x);
  free(y);
  MPI_Finalize();
  return 0;
}
