/*
 * fti_heat.c: 2D heat diffusion written against FTI's API only (fti.h), to
 * run on frame's libfti. Rows are split over the ranks of FTI_COMM_WORLD,
 * halos travel with MPI_Sendrecv, and FTI_Snapshot checkpoints the step and
 * the grid at the interval of the configuration file.
 *
 *   mpicc fti_heat.c -lfti -o fti_heat
 *   mpiexec -n 8 ./fti_heat config.fti NX NY STEPS [CRASH_AT]
 *
 * With CRASH_AT, the last rank kills itself with SIGKILL before step
 * CRASH_AT unless the run is a restart, which ends the whole MPI job; the
 * same command run again resumes from the newest checkpoint. Rank 0 prints
 * "restarted at step N in T ms" after a recovery (T: FTI_Init and the
 * recovery, on the slowest rank), at the end the time of the first
 * checkpoint (new files) and the later ones' mean (files reused), on the
 * slowest rank (with FTI_HEAT_BARRIER set, a barrier before each
 * FTI_Snapshot keeps the wait for slower ranks out of that time), and "final checksum: 0x..." (FNV-1a over the whole grid),
 * the same in every run (the last rank prints these two lines).
 */
#include <fti.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double TOP = 100.0, BOTTOM = 0.0, LEFT = 75.0, RIGHT = 50.0;

/* First global row of rank r and its row count, for nx rows on n ranks. */
static void rows_of(int nx, int n, int r, int *first, int *count) {
    int base = nx / n, extra = nx % n;
    *first = r * base + (r < extra ? r : extra);
    *count = base + (r < extra ? 1 : 0);
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t len) {
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s CONFIG NX NY STEPS [CRASH_AT]\n", argv[0]);
        return 2;
    }
    MPI_Init(&argc, &argv);
    double started = MPI_Wtime();
    int rc = FTI_Init(argv[1], MPI_COMM_WORLD);
    if (rc != FTI_SCES) {
        fprintf(stderr, "fti_heat: FTI_Init returned %d\n", rc);
        /* FTI_Init fails on every rank alike, so end in order: an abort
           can end the launcher before it has passed the messages on. */
        MPI_Finalize();
        return 3;
    }
    int rank, size;
    MPI_Comm_rank(FTI_COMM_WORLD, &rank);
    MPI_Comm_size(FTI_COMM_WORLD, &size);
    int nx = atoi(argv[2]), ny = atoi(argv[3]), steps = atoi(argv[4]);
    int crash_at = argc > 5 ? atoi(argv[5]) : -1;
    if (nx < size || ny < 1 || steps < 0) {
        if (rank == 0) fprintf(stderr, "fti_heat: need at least one row per rank\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int first, rows;
    rows_of(nx, size, rank, &first, &rows);
    int w = ny + 2;
    size_t cells = (size_t)(rows + 2) * (size_t)w;
    double *u = calloc(cells, sizeof(double));
    double *next = calloc(cells, sizeof(double));
    if (!u || !next) MPI_Abort(MPI_COMM_WORLD, 4);
    for (int i = 0; i < rows + 2; i++) {
        u[(size_t)i * w] = LEFT;
        u[(size_t)i * w + ny + 1] = RIGHT;
    }
    if (rank == 0)
        for (int j = 0; j < w; j++) u[j] = TOP;
    if (rank == size - 1)
        for (int j = 0; j < w; j++) u[(size_t)(rows + 1) * w + j] = BOTTOM;
    memcpy(next, u, cells * sizeof(double));

    int step = 0;
    const int restart = FTI_Status() != 0;
    int announce = restart;
    FTI_Protect(0, &step, 1, FTI_INTG);
    FTI_Protect(1, u, (int64_t)cells, FTI_DBLE);

    int up = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    int down = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    const int barrier = getenv("FTI_HEAT_BARRIER") != NULL;
    int checkpoints = 0;
    double first_checkpoint = 0.0, later_checkpoints = 0.0;
    for (; step < steps; step++) {
        /* With FTI_HEAT_BARRIER set, every rank arrives first, so that the
         * time of FTI_Snapshot is the checkpoint's, not the wait for the
         * slowest rank's step. */
        if (barrier) MPI_Barrier(FTI_COMM_WORLD);
        double t = MPI_Wtime();
        rc = FTI_Snapshot();
        if (rc != FTI_SCES && rc != FTI_DONE) {
            fprintf(stderr, "fti_heat: rank %d: FTI_Snapshot returned %d\n", rank, rc);
            MPI_Abort(MPI_COMM_WORLD, 5);
        }
        if (rc == FTI_DONE) {
            if (checkpoints++ == 0)
                first_checkpoint = MPI_Wtime() - t;
            else
                later_checkpoints += MPI_Wtime() - t;
        }
        if (announce) {
            double mine = MPI_Wtime() - started, slowest = 0.0;
            MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, FTI_COMM_WORLD);
            if (rank == 0) {
                printf("restarted at step %d in %.1f ms\n", step, slowest * 1e3);
                fflush(stdout);
            }
        }
        announce = 0;
        if (!restart && step == crash_at && rank == size - 1) {
            fprintf(stderr, "fti_heat: rank %d crashing at step %d\n", rank, step);
            raise(SIGKILL);
        }
        MPI_Sendrecv(u + w, w, MPI_DOUBLE, up, 1, u + (size_t)(rows + 1) * w, w, MPI_DOUBLE,
                     down, 1, FTI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(u + (size_t)rows * w, w, MPI_DOUBLE, down, 2, u, w, MPI_DOUBLE, up, 2,
                     FTI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int i = 1; i <= rows; i++)
            for (int j = 1; j <= ny; j++) {
                size_t k = (size_t)i * w + j;
                next[k] = 0.25 * (((u[k - w] + u[k + w]) + u[k - 1]) + u[k + 1]);
            }
        for (int i = 1; i <= rows; i++)
            memcpy(u + (size_t)i * w + 1, next + (size_t)i * w + 1, (size_t)ny * sizeof(double));
    }

    /* FNV-1a over the interior rows in global order, without gathering the
     * grid: each rank goes on from the hash of the ranks before it. */
    uint64_t h = 1469598103934665603ULL;
    if (rank > 0) MPI_Recv(&h, 1, MPI_UINT64_T, rank - 1, 3, FTI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 1; i <= rows; i++) h = fnv1a(h, u + (size_t)i * w + 1, (size_t)ny * sizeof(double));
    if (rank < size - 1) MPI_Send(&h, 1, MPI_UINT64_T, rank + 1, 3, FTI_COMM_WORLD);
    double times[2] = {first_checkpoint, checkpoints > 1 ? later_checkpoints / (checkpoints - 1) : 0.0};
    double slowest[2] = {0.0, 0.0};
    MPI_Reduce(times, slowest, 2, MPI_DOUBLE, MPI_MAX, size - 1, FTI_COMM_WORLD);
    if (rank == size - 1) {
        printf("checkpoints: %d, the first %.2f ms, the later ones %.2f ms each (slowest rank)\n", checkpoints,
               slowest[0] * 1e3, slowest[1] * 1e3);
        printf("final checksum: 0x%016llx\n", (unsigned long long)h);
        fflush(stdout);
    }
    rc = FTI_Finalize();
    free(u);
    free(next);
    MPI_Finalize();
    return rc == FTI_SCES ? 0 : 1;
}
