/*
 * veloc_sizes.c: VeloC's pattern for data whose size a restart learns
 * from the checkpoint, written against veloc.h only. `write CONFIG N`
 * protects a count (region 0) and N doubles (region 1) on every rank and
 * checkpoints them as version 1 of "sizes". `read CONFIG` restarts: it
 * restores the count alone (VELOC_RECOVER_SOME), asks the size of region
 * 1, allocates and protects it, restores the rest (VELOC_RECOVER_REST),
 * and checks every value; it prints "sizes: N doubles back on every rank"
 * from rank 0 when all match.
 */
#include <veloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double value(int rank, int i) { return rank * 1000.0 + i * 0.5; }

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s write|read CONFIG [N]\n", argv[0]);
        return 2;
    }
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (VELOC_Init(MPI_COMM_WORLD, argv[2]) != VELOC_SUCCESS) {
        MPI_Finalize();
        return 3;
    }
    int n = 0, ok = 1;
    double *data = NULL;
    VELOC_Mem_protect(0, &n, 1, sizeof(n));
    if (strcmp(argv[1], "write") == 0) {
        n = argc > 3 ? atoi(argv[3]) + rank : 1;
        data = malloc(sizeof(double) * (size_t)n);
        for (int i = 0; i < n; i++) data[i] = value(rank, i);
        VELOC_Mem_protect(1, data, (size_t)n, sizeof(double));
        ok = VELOC_Checkpoint("sizes", 1) == VELOC_SUCCESS;
    } else {
        int version = VELOC_Restart_test("sizes", 0);
        int ids[1] = {0};
        ok = version == 1 && VELOC_Restart_begin("sizes", version) == VELOC_SUCCESS &&
             VELOC_Recover_selective(VELOC_RECOVER_SOME, ids, 1) == VELOC_SUCCESS;
        int bytes = ok ? VELOC_Recover_size(1) : 0;
        ok = ok && bytes == (int)(sizeof(double) * (size_t)n);
        if (ok) {
            data = malloc((size_t)bytes);
            VELOC_Mem_protect(1, data, (size_t)n, sizeof(double));
            ok = VELOC_Recover_selective(VELOC_RECOVER_REST, ids, 1) == VELOC_SUCCESS;
        }
        ok = VELOC_Restart_end(ok) == VELOC_SUCCESS && ok;
        for (int i = 0; ok && i < n; i++) ok = data[i] == value(rank, i);
    }
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0 && all) printf("sizes: %s on every rank\n", argv[1][0] == 'w' ? "written" : "back");
    VELOC_Finalize(1);
    free(data);
    MPI_Finalize();
    return all ? 0 : 1;
}
