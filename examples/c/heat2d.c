/*
 * 2D heat diffusion (Jacobi iteration) in C on frame: the grid's rows are
 * split over the ranks, halo rows travel with frame_sendrecv, the state is
 * protected and checkpointed with frame_snapshot, and after a failure
 * frame_run enters resilient_main again, which recovers the newest
 * checkpoint and goes on.
 *
 *   cc -O2 -I ffi/include examples/c/heat2d.c -L target/release -lframe -o heat2d_c
 *   frame run --nodes 2 --ranks-per-node 2 -- ./heat2d_c --nx 256 --ny 256 --steps 600
 *
 * With --ulfm it runs as an MPI job that repairs itself in place
 * (frame_run_ulfm; libframe built with the ulfm feature, docs/ULFM.md):
 *
 *   mpirun --with-ft ulfm -n 10 ./heat2d_c --ulfm --die-at 275 --die-rank 2
 *
 * where --die-at STEP --die-rank R (repeatable) makes those ranks SIGKILL
 * themselves after STEP in the first run, once every node's manager has
 * promoted the checkpoints so far (frame run injects its faults with
 * --inject instead).
 *
 * The last line rank 0 prints is "final checksum: 0x<16 hex digits>", an
 * FNV-1a hash of the whole grid: a run with failures prints the same one
 * as a run without.
 */
#include <frame.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOP 100.0
#define BOTTOM 0.0
#define LEFT 75.0
#define RIGHT 50.0
#define TAG_HALO 1 /* halo rows (one message per neighbour and step) */
#define TAG_GATHER 2

#define MAX_DYING 16

struct args {
    long nx, ny, steps;
    /* --die-at and --die-rank: ranks that kill themselves in the first
     * run after that step. */
    long die_at;
    int dying[MAX_DYING], n_dying;
    /* Kept across entries of resilient_main: the protected memory must
     * stay where it is while the runtime rolls the rank back. */
    double *grid, *next;
    long rows, row0, width;
    int64_t step;
};

static int fail(const char *what, int rc) {
    fprintf(stderr, "heat2d_c: %s: %s (%d)\n", what, frame_last_error(), rc);
    return rc;
}

/* The fixed temperatures of the plate's edges, in the halo cells that lie
 * on the plate's boundary; zero inside. */
static void initial(struct args *a, int rank, int size) {
    long w = a->width;
    memset(a->grid, 0, sizeof(double) * (size_t)((a->rows + 2) * w));
    for (long j = 0; j < w; j++) {
        if (rank == 0) a->grid[j] = TOP;
        if (rank == size - 1) a->grid[(a->rows + 1) * w + j] = BOTTOM;
    }
    for (long i = 1; i <= a->rows; i++) {
        a->grid[i * w] = LEFT;
        a->grid[i * w + w - 1] = RIGHT;
    }
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t len) {
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* Rank 0 hashes the interior rows of every rank, in order. */
static int checksum(frame_ctx *ctx, struct args *a, int rank, int size) {
    long w = a->width;
    size_t row_bytes = sizeof(double) * (size_t)a->ny;
    if (rank != 0) {
        for (long i = 1; i <= a->rows; i++) {
            int rc = frame_send(ctx, 0, TAG_GATHER, &a->grid[i * w + 1], (int64_t)row_bytes);
            if (rc < 0) return fail("send", rc);
        }
        return 0;
    }
    uint64_t h = 14695981039346656037ULL;
    double *row = malloc(row_bytes);
    if (!row) return -1;
    for (int r = 0; r < size; r++) {
        long rows = a->nx / size + (r < a->nx % size);
        for (long i = 0; i < rows; i++) {
            if (r == 0) {
                memcpy(row, &a->grid[(i + 1) * w + 1], row_bytes);
            } else {
                int rc = frame_recv(ctx, r, TAG_GATHER, row, (int64_t)row_bytes);
                if (rc < 0) {
                    free(row);
                    return fail("recv", rc);
                }
            }
            h = fnv1a(h, row, row_bytes);
        }
    }
    free(row);
    printf("final checksum: 0x%016llx\n", (unsigned long long)h);
    return 0;
}

static int resilient_main(frame_ctx *ctx, int state, int n_failed, const int *failed, void *user) {
    struct args *a = user;
    int rank = frame_rank(ctx), size = frame_size(ctx);
    if (rank < 0 || size < 0) return fail("rank/size", rank < 0 ? rank : size);
    if (a->grid == NULL) {
        a->rows = a->nx / size + (rank < a->nx % size);
        a->row0 = rank * (a->nx / size) + (rank < a->nx % size ? rank : a->nx % size);
        a->width = a->ny + 2;
        a->grid = calloc((size_t)((a->rows + 2) * a->width), sizeof(double));
        a->next = calloc((size_t)((a->rows + 2) * a->width), sizeof(double));
        if (!a->grid || !a->next) return -1;
    }
    int rc = frame_init(NULL, ctx);
    if (rc < 0) return fail("frame_init", rc);
    long w = a->width, cells = (a->rows + 2) * w;
    if ((rc = frame_protect(0, &a->step, 1, FRAME_LLONG)) < 0) return fail("protect step", rc);
    if ((rc = frame_protect(1, a->grid, cells, FRAME_DOUBLE)) < 0) return fail("protect grid", rc);
    if (frame_status() == FRAME_DONE) {
        if ((rc = frame_recover()) < 0) return fail("frame_recover", rc);
        if (rank == 0)
            printf("rank 0 entered in state %d (%d failed rank(s)%s%d); recovered step %lld\n", state,
                   n_failed, n_failed > 0 ? ", first " : "", n_failed > 0 ? failed[0] : 0,
                   (long long)a->step);
    } else {
        a->step = 0;
        initial(a, rank, size);
        if (rank == 0) printf("rank 0 entered in state %d; starting at step 0\n", state);
    }
    memcpy(a->next, a->grid, sizeof(double) * (size_t)cells);
    size_t row_bytes = sizeof(double) * (size_t)w;
    while (a->step < a->steps) {
        if ((rc = frame_fault_point(ctx, a->step)) < 0) return fail("fault point", rc);
        double *u = a->grid;
        if (rank > 0) {
            rc = frame_sendrecv(ctx, &u[w], (int64_t)row_bytes, rank - 1, &u[0], (int64_t)row_bytes,
                                rank - 1, TAG_HALO);
            if (rc < 0) return fail("halo above", rc);
        }
        if (rank < size - 1) {
            rc = frame_sendrecv(ctx, &u[a->rows * w], (int64_t)row_bytes, rank + 1,
                                &u[(a->rows + 1) * w], (int64_t)row_bytes, rank + 1, TAG_HALO);
            if (rc < 0) return fail("halo below", rc);
        }
        for (long i = 1; i <= a->rows; i++) {
            for (long j = 1; j <= a->ny; j++) {
                long k = i * w + j;
                a->next[k] = 0.25 * (((u[k - w] + u[k + w]) + u[k - 1]) + u[k + 1]);
            }
        }
        /* Interior cells move to the protected grid; halos and edges stay. */
        for (long i = 1; i <= a->rows; i++)
            memcpy(&u[i * w + 1], &a->next[i * w + 1], sizeof(double) * (size_t)a->ny);
        a->step += 1;
        if ((rc = frame_snapshot()) < 0) return fail("frame_snapshot", rc);
        if (state == FRAME_STATE_NEW && a->step == a->die_at) {
            /* The failure comes once the partner copies exist, however
             * slow the machine. */
            if ((rc = frame_wait_promotions()) < 0) return fail("frame_wait_promotions", rc);
            for (int i = 0; i < a->n_dying; i++) {
                if (a->dying[i] == rank) {
                    fprintf(stderr, "heat2d_c: rank %d dying at step %lld\n", rank, (long long)a->step);
                    fflush(stderr);
                    raise(SIGKILL);
                }
            }
        }
    }
    /* Collectives: every rank's row count adds up to the grid's, and the
     * hottest interior cell is below the hottest edge. */
    int64_t rows = a->rows;
    double hottest = 0.0;
    for (long i = 1; i <= a->rows; i++)
        for (long j = 1; j <= a->ny; j++)
            if (a->grid[i * w + j] > hottest) hottest = a->grid[i * w + j];
    if ((rc = frame_allreduce_i64(ctx, &rows, 1, FRAME_SUM)) < 0) return fail("all-reduce", rc);
    if ((rc = frame_allreduce_f64(ctx, &hottest, 1, FRAME_MAX)) < 0) return fail("all-reduce", rc);
    if ((rc = frame_barrier(ctx)) < 0) return fail("barrier", rc);
    if (rank == 0) printf("rows: %lld, hottest interior cell: %.3f\n", (long long)rows, hottest);
    if ((rc = checksum(ctx, a, rank, size)) < 0) return rc;
    if ((rc = frame_finalize()) < 0) return fail("frame_finalize", rc);
    return 0;
}

static int usage(void) {
    fprintf(stderr,
            "usage: heat2d_c [--nx N] [--ny N] [--steps N] [--ulfm] [--die-at STEP --die-rank R]...\n");
    return 2;
}

int main(int argc, char **argv) {
    struct args a = {.nx = 128, .ny = 128, .steps = 400, .die_at = -1};
    int ulfm = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--ulfm") == 0) {
            ulfm = 1;
            continue;
        }
        if (i + 1 >= argc) return usage();
        char *end;
        long v = strtol(argv[i + 1], &end, 10);
        if (*argv[i + 1] == '\0' || *end != '\0' || v < 0) return usage();
        if (strcmp(argv[i], "--nx") == 0) a.nx = v;
        else if (strcmp(argv[i], "--ny") == 0) a.ny = v;
        else if (strcmp(argv[i], "--steps") == 0) a.steps = v;
        else if (strcmp(argv[i], "--die-at") == 0) a.die_at = v;
        else if (strcmp(argv[i], "--die-rank") == 0 && a.n_dying < MAX_DYING) a.dying[a.n_dying++] = (int)v;
        else return usage();
        i++;
    }
    if (ulfm) return frame_run_ulfm(argc, argv, NULL, resilient_main, &a);
    return frame_run(argc, argv, resilient_main, &a);
}
