/*
 * A stand-in for the MPI applications of benches/apps, written for frame's
 * tests: an MPI program as its authors would publish it, with no frame in
 * it. Conjugate gradients on the 1D Poisson matrix (2 on the diagonal, -1
 * beside it), each rank a block of rows: a setup phase, a halo exchange
 * (MPI_Irecv, MPI_Isend, MPI_Waitall) and two all-reduces per iteration,
 * a fixed number of iterations, and a verification line. Like HPCCG, it
 * says MPI_COMM_WORLD everywhere and keeps its vectors in main.
 *
 *   mpicc -O2 cg.c -o cg && mpirun -n 4 ./cg ROWS_PER_RANK ITERATIONS
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* y = A p for this rank's rows; p has one halo value at each end. */
static void multiply(long n, const double *p, double *y) {
    for (long i = 0; i < n; i++) y[i] = 2.0 * p[i + 1] - p[i] - p[i + 2];
}

/* The halo values of p from the neighbouring ranks (0 at the ends). */
static void exchange(long n, double *p, int rank, int size) {
    MPI_Request req[4];
    int k = 0;
    p[0] = p[n + 1] = 0.0;
    if (rank > 0) {
        MPI_Irecv(&p[0], 1, MPI_DOUBLE, rank - 1, 1, MPI_COMM_WORLD, &req[k++]);
        MPI_Isend(&p[1], 1, MPI_DOUBLE, rank - 1, 2, MPI_COMM_WORLD, &req[k++]);
    }
    if (rank < size - 1) {
        MPI_Irecv(&p[n + 1], 1, MPI_DOUBLE, rank + 1, 2, MPI_COMM_WORLD, &req[k++]);
        MPI_Isend(&p[n], 1, MPI_DOUBLE, rank + 1, 1, MPI_COMM_WORLD, &req[k++]);
    }
    MPI_Waitall(k, req, MPI_STATUSES_IGNORE);
}

static double dot(long n, const double *a, const double *b) {
    double local = 0.0, global = 0.0;
    for (long i = 0; i < n; i++) local += a[i] * b[i];
    MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return global;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 3 || atol(argv[1]) < 1 || atol(argv[2]) < 1) {
        if (rank == 0) fprintf(stderr, "usage: %s ROWS_PER_RANK ITERATIONS\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long n = atol(argv[1]);
    int iterations = atoi(argv[2]);

    /* Setup: b is the matrix times a known solution; x starts at 0. */
    double *x = calloc(n, sizeof(double)), *r = malloc(n * sizeof(double));
    double *p = calloc(n + 2, sizeof(double)), *ap = malloc(n * sizeof(double));
    double *b = malloc(n * sizeof(double));
    if (!x || !r || !p || !ap || !b) MPI_Abort(MPI_COMM_WORLD, 1);
    for (long i = 0; i < n; i++) p[i + 1] = sin(0.001 * (double)(rank * n + i));
    exchange(n, p, rank, size);
    multiply(n, p, b);
    for (long i = 0; i < n; i++) {
        r[i] = b[i];
        p[i + 1] = r[i];
    }
    double rtrans = dot(n, r, r);
    if (rank == 0) printf("Initial residual: %g\n", sqrt(rtrans));

    double start = MPI_Wtime();
    for (int k = 1; k <= iterations; k++) {
        exchange(n, p, rank, size);
        multiply(n, p, ap);
        double alpha = rtrans / dot(n, p + 1, ap);
        for (long i = 0; i < n; i++) {
            x[i] += alpha * p[i + 1];
            r[i] -= alpha * ap[i];
        }
        double old = rtrans;
        rtrans = dot(n, r, r);
        for (long i = 0; i < n; i++) p[i + 1] = r[i] + rtrans / old * p[i + 1];
        if (rank == 0 && k % 100 == 0) printf("Iteration %d: residual %g\n", k, sqrt(rtrans));
    }
    if (rank == 0) printf("Loop time: %f s\n", MPI_Wtime() - start);
    if (rank == 0) printf("Final residual: %g\n", sqrt(rtrans));
    free(x), free(r), free(p), free(ap), free(b);
    MPI_Finalize();
    return 0;
}
