/*
 * heat_mpi.h: the 2-D heat solver's grid, Jacobi step and checksum shared
 * by the MPI programs that checkpoint it through different libraries
 * (fti_heat.c through FTI's API, scr_heat.c through SCR's,
 * benches/side_by_side/veloc_heat.c through VeloC's), so that one work gives one checksum whichever library saves it.
 * Rows are split over the ranks of `comm`, with one halo row above and
 * below and one halo column on each side.
 */
#ifndef FRAME_HEAT_MPI_H
#define FRAME_HEAT_MPI_H

#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct heat {
    int rows, ny, w;
    size_t cells;
    double *u, *next;
};

/* The rank's share of nx rows (the first ranks take one more when they
 * do not divide evenly), both grids allocated and the plate's fixed edge
 * temperatures set.
 * Returns 0, or -1 when memory runs out. */
static int heat_init(struct heat *h, int nx, int ny, int rank, int size) {
    static const double TOP = 100.0, BOTTOM = 0.0, LEFT = 75.0, RIGHT = 50.0;
    int base = nx / size, extra = nx % size;
    h->rows = base + (rank < extra ? 1 : 0);
    h->ny = ny;
    h->w = ny + 2;
    h->cells = (size_t)(h->rows + 2) * (size_t)h->w;
    h->u = calloc(h->cells, sizeof(double));
    h->next = calloc(h->cells, sizeof(double));
    if (!h->u || !h->next) return -1;
    for (int i = 0; i < h->rows + 2; i++) {
        h->u[(size_t)i * h->w] = LEFT;
        h->u[(size_t)i * h->w + ny + 1] = RIGHT;
    }
    if (rank == 0)
        for (int j = 0; j < h->w; j++) h->u[j] = TOP;
    if (rank == size - 1)
        for (int j = 0; j < h->w; j++) h->u[(size_t)(h->rows + 1) * h->w + j] = BOTTOM;
    memcpy(h->next, h->u, h->cells * sizeof(double));
    return 0;
}

/* One Jacobi step: halo rows from the neighbours, then every interior cell. */
static void heat_step(struct heat *h, int rank, int size, MPI_Comm comm) {
    int w = h->w, rows = h->rows;
    double *u = h->u, *next = h->next;
    int up = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    int down = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    MPI_Sendrecv(u + w, w, MPI_DOUBLE, up, 1, u + (size_t)(rows + 1) * w, w, MPI_DOUBLE, down, 1, comm,
                 MPI_STATUS_IGNORE);
    MPI_Sendrecv(u + (size_t)rows * w, w, MPI_DOUBLE, down, 2, u, w, MPI_DOUBLE, up, 2, comm,
                 MPI_STATUS_IGNORE);
    for (int i = 1; i <= rows; i++)
        for (int j = 1; j <= h->ny; j++) {
            size_t k = (size_t)i * w + j;
            next[k] = 0.25 * (((u[k - w] + u[k + w]) + u[k - 1]) + u[k + 1]);
        }
    for (int i = 1; i <= rows; i++)
        memcpy(u + (size_t)i * w + 1, next + (size_t)i * w + 1, (size_t)h->ny * sizeof(double));
}

/* FNV-1a over the interior rows in global order, without gathering the
 * grid: each rank goes on from the hash of the ranks before it. The last
 * rank returns the hash of the whole grid. */
static uint64_t heat_checksum(const struct heat *h, int rank, int size, MPI_Comm comm) {
    uint64_t hash = 1469598103934665603ULL;
    if (rank > 0) MPI_Recv(&hash, 1, MPI_UINT64_T, rank - 1, 3, comm, MPI_STATUS_IGNORE);
    for (int i = 1; i <= h->rows; i++) {
        const unsigned char *p = (const unsigned char *)(h->u + (size_t)i * h->w + 1);
        for (size_t b = 0; b < (size_t)h->ny * sizeof(double); b++) {
            hash ^= p[b];
            hash *= 1099511628211ULL;
        }
    }
    if (rank < size - 1) MPI_Send(&hash, 1, MPI_UINT64_T, rank + 1, 3, comm);
    return hash;
}

/* The lines the side-by-side script reads, printed by the last rank: the
 * first checkpoint's time and the later ones' mean on the slowest rank,
 * then the grid's checksum. Collective. */
static void heat_report(const struct heat *h, int checkpoints, double first, double later, int rank, int size,
                        MPI_Comm comm) {
    uint64_t hash = heat_checksum(h, rank, size, comm);
    double times[2] = {first, checkpoints > 1 ? later / (checkpoints - 1) : 0.0};
    double slowest[2] = {0.0, 0.0};
    MPI_Reduce(times, slowest, 2, MPI_DOUBLE, MPI_MAX, size - 1, comm);
    if (rank == size - 1) {
        printf("checkpoints: %d, the first %.2f ms, the later ones %.2f ms each (slowest rank)\n", checkpoints,
               slowest[0] * 1e3, slowest[1] * 1e3);
        printf("final checksum: 0x%016llx\n", (unsigned long long)hash);
        fflush(stdout);
    }
}

/* The crash a run asks for at `step` (every rank calls it there): the
 * last rank kills itself with SIGKILL. With HEAT_CRASH_NODE=DIR the last
 * two ranks do, a virtual node of two ranks lost whole: the last rank
 * first moves DIR (the node's storage, which its loss takes) to DIR.lost
 * and every rank passes a barrier, so that no survivor looks in DIR
 * before it is gone. Collective with HEAT_CRASH_NODE. */
static void heat_crash(const char *program, int step, int rank, int size, MPI_Comm comm) {
    const char *node = getenv("HEAT_CRASH_NODE");
    if (node) {
        char lost[4096];
        snprintf(lost, sizeof(lost), "%s.lost", node);
        if (rank == size - 1 && rename(node, lost) != 0) fprintf(stderr, "%s: cannot move %s away\n", program, node);
        MPI_Barrier(comm);
    }
    if (rank == size - 1 || (node && rank == size - 2)) {
        fprintf(stderr, "%s: rank %d crashing at step %d\n", program, rank, step);
        fflush(stderr);
        raise(SIGKILL);
    }
}

#endif
