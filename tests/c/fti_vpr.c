/*
 * fti_vpr.c: a checkpoint written by N ranks recovered on M ranks, through
 * FTI's global data sets (FTI_DefineGlobalDataset, FTI_AddSubset) and the
 * single file (h5_single_file_enable = 1, FTI_L4_H5_SINGLE, and
 * [restart] failure = 3), on frame's libfti:
 *
 *   mpiexec -n N ./fti_vpr CONFIG write NX NY
 *       an NX x NY grid of doubles split by rows over the ranks, and the
 *       step (a one-element data set every rank holds), checkpointed at
 *       steps 10 and 20 with FTI_Checkpoint(step, FTI_L4_H5_SINGLE); then
 *       the last rank SIGKILLs the job;
 *   mpiexec -n M ./fti_vpr CONFIG recover NX NY
 *       (after [restart] failure = 3) learns the grid's size with
 *       FTI_RecoverDatasetDimension, takes its rows of M, recovers them
 *       and checks every value and the step.
 *
 * Every check prints "ok: ..." (rank 0) or "FAIL: ..."; the runs end with
 * "vpr: written" and "vpr: recovered on M ranks".
 */
#include <fti.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"

static double value(long i, long j, int step) { return i * 1000.0 + j + step * 1e-3; }

/* The first of this rank's rows of nx over size ranks, and how many. */
static void rows_of(long nx, int size, long *first, long *count) {
    long base = nx / size, extra = nx % size;
    *count = base + (rank < extra ? 1 : 0);
    *first = rank * base + (rank < extra ? rank : extra);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    if (argc < 5) {
        fprintf(stderr, "usage: fti_vpr CONFIG write|recover NX NY\n");
        MPI_Finalize();
        return 2;
    }
    int rc = FTI_Init(argv[1], MPI_COMM_WORLD);
    if (rc != FTI_SCES) {
        fprintf(stderr, "fti_vpr: FTI_Init returned %d\n", rc);
        MPI_Finalize();
        return 3;
    }
    int size;
    MPI_Comm_rank(FTI_COMM_WORLD, &rank);
    MPI_Comm_size(FTI_COMM_WORLD, &size);
    long nx = atol(argv[3]), ny = atol(argv[4]);
    int step = 0;
    const int recovering = strcmp(argv[2], "recover") == 0;

    /* The grid's size: as given, or on a restart as the file holds it. */
    FTIT_hsize_t dims[2] = {recovering ? 1 : (FTIT_hsize_t)nx, recovering ? 1 : (FTIT_hsize_t)ny};
    FTIT_hsize_t one = 1;
    check(FTI_DefineGlobalDataset(0, 2, dims, "grid", NULL, FTI_DBLE) == FTI_SCES, "the grid as a global data set");
    check(FTI_DefineGlobalDataset(1, 1, &one, "step", NULL, FTI_INTG) == FTI_SCES, "the step as a global data set");
    check(FTI_DefineGlobalDataset(0, 2, dims, "again", NULL, FTI_DBLE) == FTI_NSCS, "an id is defined once");
    if (recovering) {
        check(FTI_Status() == 1, "a restart");
        check(FTI_RecoverDatasetDimension(0) == FTI_SCES, "FTI_RecoverDatasetDimension");
        FTIT_hsize_t *span = FTI_GetDatasetSpan(0, 2);
        check(span != NULL && span[0] == (FTIT_hsize_t)nx && span[1] == (FTIT_hsize_t)ny,
              "the grid's stored dimensions");
        check(FTI_GetDatasetRank(0) == 2, "the grid's rank");
    }
    long first, rows;
    rows_of(nx, size, &first, &rows);
    double *grid = calloc((size_t)(rows * ny), sizeof(double));
    FTI_Protect(0, &step, 1, FTI_INTG);
    FTI_Protect(1, grid, rows * ny, FTI_DBLE);
    FTIT_hsize_t offset[2] = {(FTIT_hsize_t)first, 0}, count[2] = {(FTIT_hsize_t)rows, (FTIT_hsize_t)ny};
    FTIT_hsize_t zero = 0;
    check(FTI_AddSubset(0, 1, &zero, &one, 1) == FTI_SCES, "the step is every rank's");
    check(FTI_AddSubset(1, 2, offset, count, 0) == FTI_SCES, "the rank's rows of the grid");
    FTIT_hsize_t past[2] = {(FTIT_hsize_t)nx, 0};
    check(FTI_AddSubset(1, 2, past, count, 0) == FTI_NSCS, "rows past the grid are refused");

    if (!recovering) {
        for (step = 10; step <= 20; step += 10) {
            for (long i = 0; i < rows; i++)
                for (long j = 0; j < ny; j++) grid[i * ny + j] = value(first + i, j, step);
            check(FTI_Checkpoint(step, FTI_L4_H5_SINGLE) == FTI_DONE, "a checkpoint with its single file");
        }
        MPI_Barrier(FTI_COMM_WORLD);
        if (rank == 0) {
            printf("vpr: written\n");
            fflush(stdout);
        }
        MPI_Barrier(FTI_COMM_WORLD);
        if (failures == 0 && rank == size - 1) raise(SIGKILL);
        MPI_Barrier(FTI_COMM_WORLD);
    } else {
        check(FTI_GetStoredSize(1) == (int64_t)(rows * ny * sizeof(double)), "the rows' stored size");
        check(FTI_Recover() == FTI_SCES, "FTI_Recover");
        check(step == 20, "the newest step");
        long wrong = 0;
        for (long i = 0; i < rows; i++)
            for (long j = 0; j < ny; j++)
                if (grid[i * ny + j] != value(first + i, j, 20)) wrong++;
        check(wrong == 0, "every value of the rank's rows");
        int all = 0;
        MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, FTI_COMM_WORLD);
        if (all == 0 && rank == 0) printf("vpr: recovered on %d ranks\n", size);
    }
    FTI_Finalize();
    free(grid);
    MPI_Finalize();
    return failures == 0 ? 0 : 1;
}
