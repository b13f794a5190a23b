/*
 * fti_vars.c: FTI's calls for variables whose size changes, variables
 * recovered one by one, and checkpoints written variable by variable, on
 * frame's libfti. Run twice under mpiexec with the same configuration:
 *
 *   first run:  checks bad arguments, writes an L1 checkpoint, grows an
 *               array, writes an incremental checkpoint (changing a value
 *               after adding it), then the last rank SIGKILLs the job;
 *   second run: sizes the array with FTI_GetStoredSize and FTI_Realloc,
 *               recovers the variables one by one and checks every value.
 *
 * Every check prints "ok: ..." or "FAIL: ..."; the last line of a second
 * run that passed is "vars: all checks passed".
 */
#include <fti.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "checks.h"


static double value(int r, int i) { return r * 1000000.0 + i * 0.5; }

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rc = FTI_Init(argc > 1 ? argv[1] : "", MPI_COMM_WORLD);
    if (rc != FTI_SCES) {
        fprintf(stderr, "fti_vars: FTI_Init returned %d\n", rc);
        /* FTI_Init fails on every rank alike, so end in order: an abort
           can end the launcher before it has passed the messages on. */
        MPI_Finalize();
        return 3;
    }
    int size;
    MPI_Comm_rank(FTI_COMM_WORLD, &rank);
    MPI_Comm_size(FTI_COMM_WORLD, &size);
    int n = 0;
    long counter = 0;
    double *arr = NULL;

    if (FTI_Status() == 0) {
        int x = 0;
        check(FTI_Protect(9, &x, 1, 12345) == FTI_NSCS, "an unknown type handle is refused");
        check(FTI_Protect(-1, &x, 1, FTI_INTG) == FTI_NSCS, "a negative id is refused");
        check(FTI_Protect(9, &x, -4, FTI_INTG) == FTI_NSCS, "a negative count is refused");
        check(FTI_Protect(9, NULL, 4, FTI_INTG) == FTI_NSCS, "a null pointer is refused");
        check(FTI_Checkpoint(1, 10) == FTI_NSCS, "level 10 is refused");
        check(FTI_Checkpoint(1, 0) == FTI_NSCS, "level 0 is refused");
        check(FTI_Recover() == FTI_NREC, "nothing to recover on a first run");
        check(FTI_GetStoredSize(1) == 0, "no stored size on a first run");
        check(FTI_AddVarICP(0) == FTI_NSCS, "FTI_AddVarICP before FTI_InitICP is refused");
        fti_id_t pair;
        check(FTI_InitType(&pair, 16) == FTI_SCES, "FTI_InitType registers a 16-byte type");

        n = 1000;
        arr = malloc((size_t)n * sizeof(double));
        for (int i = 0; i < n; i++) arr[i] = value(rank, i) - 1.0;
        counter = 3;
        FTI_Protect(0, &n, 1, FTI_INTG);
        FTI_Protect(1, arr, n, FTI_DBLE);
        FTI_Protect(2, &counter, 1, FTI_LONG);
        check(FTI_Checkpoint(1, 1) == FTI_DONE, "FTI_Checkpoint writes at level 1");

        n = 3000;
        arr = realloc(arr, (size_t)n * sizeof(double));
        for (int i = 0; i < n; i++) arr[i] = value(rank, i);
        counter = 7;
        check(FTI_Protect(1, arr, n, FTI_DBLE) == FTI_SCES, "the grown array is protected again");

        check(FTI_InitICP(2, 1, true) == FTI_SCES, "FTI_InitICP");
        check(FTI_AddVarICP(0) == FTI_SCES, "FTI_AddVarICP(0)");
        check(FTI_AddVarICP(1) == FTI_SCES, "FTI_AddVarICP(1)");
        arr[0] = -42.0; /* after it was added: the checkpoint keeps value(rank, 0) */
        check(FTI_FinalizeICP() == FTI_NSCS, "FTI_FinalizeICP refuses a checkpoint missing variable 2");
        check(FTI_InitICP(3, 1, true) == FTI_SCES, "FTI_InitICP again");
        arr[0] = value(rank, 0);
        check(FTI_AddVarICP(2) == FTI_SCES && FTI_AddVarICP(0) == FTI_SCES && FTI_AddVarICP(1) == FTI_SCES,
              "every variable added");
        check(FTI_AddVarICP(1) == FTI_NSCS, "a variable added twice is refused");
        arr[0] = -42.0;
        counter = 99;
        check(FTI_FinalizeICP() == FTI_SCES, "FTI_FinalizeICP writes the checkpoint");
        check(arr[0] == -42.0 && counter == 99, "the program's own values are untouched");
        MPI_Barrier(FTI_COMM_WORLD);
        if (failures == 0 && rank == 0) printf("vars: first run done\n");
        fflush(stdout);
        MPI_Barrier(FTI_COMM_WORLD);
        if (rank == size - 1) raise(SIGKILL);
        MPI_Barrier(FTI_COMM_WORLD);
        return 1;
    }

    check(FTI_GetStoredSize(1) == 3000 * (int64_t)sizeof(double), "FTI_GetStoredSize gives the grown size");
    check(FTI_GetStoredSize(0) == (int64_t)sizeof(int), "FTI_GetStoredSize of an int");
    check(FTI_GetStoredSize(77) == 0, "FTI_GetStoredSize of an unknown variable is 0");
    arr = malloc(10 * sizeof(double));
    FTI_Protect(0, &n, 1, FTI_INTG);
    FTI_Protect(1, arr, 10, FTI_DBLE);
    FTI_Protect(2, &counter, 1, FTI_LONG);
    arr = FTI_Realloc(1, arr);
    check(arr != NULL, "FTI_Realloc gives a buffer");
    check(FTI_RecoverVarInit() == FTI_SCES, "FTI_RecoverVarInit");
    check(FTI_RecoverVar(0) == FTI_SCES && n == 3000, "variable 0 alone: n is 3000");
    check(counter == 0, "variable 2 not recovered yet");
    check(FTI_RecoverVar(2) == FTI_SCES && counter == 7, "variable 2: the value when it was added");
    check(FTI_RecoverVar(1) == FTI_SCES, "variable 1 recovered");
    int same = 1;
    for (int i = 0; i < 3000 && arr; i++) same &= arr[i] == value(rank, i);
    check(same, "every element of the array as it was added");
    check(FTI_RecoverVar(55) == FTI_NSCS, "an unprotected variable cannot be recovered");
    check(FTI_RecoverVarFinalize() == FTI_SCES, "FTI_RecoverVarFinalize");
    check(FTI_Status() == 1, "the restart stays pending afterwards, as in FTI");
    check(FTI_Checkpoint(4, 1) == FTI_DONE, "checkpoints go on after the recovery");
    free(arr);
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, FTI_COMM_WORLD);
    FTI_Finalize();
    if (rank == 0 && all == 0) printf("vars: all checks passed\n");
    MPI_Finalize();
    return all == 0 ? 0 : 1;
}
