/*
 * fti_dcp.c: FTI's differential checkpoints (enable_dcp = 1, level
 * FTI_L4_DCP) on frame's libfti. Each rank protects 1 MiB of doubles, 256
 * blocks of 4 KiB:
 *
 *   mpiexec -n 8 ./fti_dcp CONFIG write     checkpoints version 1, then
 *       versions 2 to 5, each after changing a tenth of the blocks (other
 *       ones each time; the last 26 blocks never change), each with
 *       FTI_Checkpoint(version, FTI_L4_DCP); then the last rank SIGKILLs
 *       the job;
 *   mpiexec -n 8 ./fti_dcp CONFIG recover   FTI_Recover, then every value
 *       checked against version 5.
 *
 * Every check prints "ok: ..." (rank 0) or "FAIL: ..."; the runs end with
 * "dcp: written" and "dcp: recovered bit-exact".
 */
#include <fti.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"

#define N (1 << 17)
#define PER_BLOCK 512
#define BLOCKS (N / PER_BLOCK)
#define STABLE 230
#define VERSIONS 5

/* Whether block b changes in version v (2 to VERSIONS). */
static int changes(int b, int v) { return b < STABLE && (b + 3 * v) % 10 == 0; }

/* The version of block b once version v is written. */
static int version_of(int b, int v) {
    int last = 1;
    for (int w = 2; w <= v; w++)
        if (changes(b, w)) last = w;
    return last;
}

static double value(int i, int version) { return rank * 1e6 + i * 0.5 + version * 1e-3; }

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    if (argc < 3) {
        fprintf(stderr, "usage: fti_dcp CONFIG write|recover\n");
        MPI_Finalize();
        return 2;
    }
    int rc = FTI_Init(argv[1], MPI_COMM_WORLD);
    if (rc != FTI_SCES) {
        fprintf(stderr, "fti_dcp: FTI_Init returned %d\n", rc);
        MPI_Finalize();
        return 3;
    }
    int size;
    MPI_Comm_rank(FTI_COMM_WORLD, &rank);
    MPI_Comm_size(FTI_COMM_WORLD, &size);
    double *data = calloc(N, sizeof(double));
    int version = 0;
    FTI_Protect(0, &version, 1, FTI_INTG);
    FTI_Protect(1, data, N, FTI_DBLE);

    if (strcmp(argv[2], "write") == 0) {
        for (int i = 0; i < N; i++) data[i] = value(i, 1);
        for (version = 1; version <= VERSIONS; version++) {
            if (version > 1)
                for (int b = 0; b < BLOCKS; b++)
                    if (changes(b, version))
                        for (int i = b * PER_BLOCK; i < (b + 1) * PER_BLOCK; i++) data[i] = value(i, version);
            check(FTI_Checkpoint(version, FTI_L4_DCP) == FTI_DONE, "a differential checkpoint");
        }
        MPI_Barrier(FTI_COMM_WORLD);
        if (rank == 0) {
            printf("dcp: written\n");
            fflush(stdout);
        }
        MPI_Barrier(FTI_COMM_WORLD);
        if (failures == 0 && rank == size - 1) raise(SIGKILL);
        MPI_Barrier(FTI_COMM_WORLD);
    } else {
        check(FTI_Status() == 1, "a restart");
        check(FTI_Recover() == FTI_SCES, "FTI_Recover");
        check(version == VERSIONS, "the newest version");
        int wrong = 0;
        for (int i = 0; i < N; i++)
            if (data[i] != value(i, version_of(i / PER_BLOCK, VERSIONS))) wrong++;
        check(wrong == 0, "every value of the newest version");
        if (failures == 0 && rank == 0) printf("dcp: recovered bit-exact\n");
    }
    FTI_Finalize();
    free(data);
    MPI_Finalize();
    return failures == 0 ? 0 : 1;
}
