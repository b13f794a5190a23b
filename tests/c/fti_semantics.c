/*
 * fti_semantics.c: what FTI programs rely on FTI doing, one behaviour per
 * mode, on frame's libfti:
 *
 *   mpiexec -n 8 ./fti_semantics CONFIG MODE LEVEL
 *
 * Two-run modes (the first run checkpoints at LEVEL, then the last rank
 * SIGKILLs the job; the same command run again checks the restart):
 *   mixed  even ranks recover with FTI_Recover, odd ranks variable by
 *          variable (FTI_RecoverVarInit/FTI_RecoverVar/FTI_RecoverVarFinalize),
 *          with no collective call between: nobody waits for anybody;
 *   retry  the array is protected too small: FTI_RecoverVar fails, then
 *          FTI_Realloc sizes it and FTI_RecoverVar succeeds;
 *   id0    the checkpoint is written with FTI_Checkpoint(0, LEVEL).
 * One-run modes:
 *   rollback  FTI_Recover after FTI_Checkpoint goes back to that
 *             checkpoint, on the ranks that call it (LEVEL may be one of
 *             FTI's differential ids, 5 to 9); variable ids by name;
 *   reinit    FTI_Init again without FTI_Finalize starts a session that
 *             finds the first one's checkpoint.
 * stage REMOTE [background] (enable_staging = 1): a file per rank written
 *   in the stage directory and moved to REMOTE with FTI_SendFile (in the
 *   background with head = 1, said by "background"); a move that cannot
 *   succeed is reported.
 * keep (keep_last_ckpt = 1): the first run checkpoints twice at LEVEL and
 *   ends with FTI_Finalize; run again (after the nodes' storage was
 *   wiped), it recovers the last checkpoint.
 *
 * Every check prints "ok: ..." (rank 0) or "FAIL: ..."; a run that passed
 * ends with "semantics MODE: all checks passed" (or, for the first run of
 * a two-run mode, "semantics MODE: first run done").
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <fti.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "checks.h"
#include <string.h>
#include <time.h>

#define N 4096


static double value(int r, int i, int version) { return r * 1e6 + i * 0.25 + version * 1e-3; }

static void fill(double *a, int n, int version) {
    for (int i = 0; i < n; i++) a[i] = value(rank, i, version);
}

static int same(const double *a, int n, int version) {
    for (int i = 0; i < n; i++)
        if (a[i] != value(rank, i, version)) return 0;
    return 1;
}

/* Protects the count, the array and the counter as variables 0, 1, 2. */
static void protect(int *n, double *arr, int count, long *counter) {
    FTI_Protect(0, n, 1, FTI_INTG);
    FTI_Protect(1, arr, count, FTI_DBLE);
    FTI_Protect(2, counter, 1, FTI_LONG);
}

/* Ends a run: every rank's failures summed, the verdict on rank 0. */
static int finish(const char *mode, const char *done, int finalize) {
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, FTI_COMM_WORLD);
    if (finalize) FTI_Finalize();
    if (rank == 0 && all == 0) printf("semantics %s: %s\n", mode, done);
    fflush(stdout);
    return all;
}

/* The first run of a two-run mode: checkpoint, then die. */
static int first_run(const char *mode, int level, int id) {
    int n = N;
    long counter = 41;
    double *arr = malloc(N * sizeof(double));
    fill(arr, n, 1);
    protect(&n, arr, n, &counter);
    check(FTI_Checkpoint(id, level) == FTI_DONE, "the checkpoint is written");
    /* Changed after the checkpoint: a restart must not see this. */
    fill(arr, n, 2);
    counter = -1;
    if (finish(mode, "first run done", 0) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Barrier(FTI_COMM_WORLD);
    int size;
    MPI_Comm_size(FTI_COMM_WORLD, &size);
    if (rank == size - 1) raise(SIGKILL);
    MPI_Barrier(FTI_COMM_WORLD);
    return 1;
}

static int restart_mixed(void) {
    int n = N;
    long counter = 0;
    double *arr = calloc(N, sizeof(double));
    protect(&n, arr, n, &counter);
    if (rank % 2 == 0) {
        check(FTI_Recover() == FTI_SCES, "FTI_Recover on the even ranks");
    } else {
        check(FTI_RecoverVarInit() == FTI_SCES, "FTI_RecoverVarInit on the odd ranks");
        check(FTI_RecoverVar(2) == FTI_SCES, "FTI_RecoverVar(2)");
        check(FTI_RecoverVar(1) == FTI_SCES, "FTI_RecoverVar(1)");
        check(FTI_RecoverVar(0) == FTI_SCES, "FTI_RecoverVar(0)");
        check(FTI_RecoverVarFinalize() == FTI_SCES, "FTI_RecoverVarFinalize");
    }
    check(n == N && counter == 41 && same(arr, N, 1), "every variable as checkpointed");
    check(FTI_Checkpoint(2, 1) == FTI_DONE, "checkpoints go on after the restart");
    free(arr);
    return finish("mixed", "all checks passed", 1);
}

static int restart_retry(void) {
    int n = 0;
    long counter = 0;
    double *arr = calloc(10, sizeof(double));
    protect(&n, arr, 10, &counter);
    check(FTI_RecoverVarInit() == FTI_SCES, "FTI_RecoverVarInit");
    check(FTI_RecoverVar(0) == FTI_SCES && n == N, "the count comes back first");
    check(FTI_RecoverVar(1) != FTI_SCES, "the array protected too small is refused");
    check(FTI_RecoverVarFinalize() == FTI_SCES, "FTI_RecoverVarFinalize");
    check(FTI_Status() != 0, "the restart stays pending");
    check(FTI_GetStoredSize(1) == N * (int64_t)sizeof(double), "FTI_GetStoredSize of the array");
    double *grown = FTI_Realloc(1, arr);
    check(grown != NULL && grown != arr, "FTI_Realloc gives a buffer of the stored size");
    if (grown) arr = grown;
    check(FTI_RecoverVarInit() == FTI_SCES, "FTI_RecoverVarInit again");
    check(FTI_RecoverVar(1) == FTI_SCES, "FTI_RecoverVar(1) after FTI_Realloc");
    check(FTI_RecoverVar(2) == FTI_SCES, "FTI_RecoverVar(2)");
    check(FTI_RecoverVarFinalize() == FTI_SCES, "FTI_RecoverVarFinalize again");
    check(counter == 41 && same(arr, N, 1), "every variable as checkpointed");
    free(arr);
    return finish("retry", "all checks passed", 1);
}

static int restart_id0(void) {
    int n = 0;
    long counter = 0;
    double *arr = calloc(N, sizeof(double));
    protect(&n, arr, N, &counter);
    check(FTI_Status() != 0, "the checkpoint written with id 0 is found");
    check(FTI_Recover() == FTI_SCES, "FTI_Recover");
    check(n == N && counter == 41 && same(arr, N, 1), "every variable as checkpointed");
    check(FTI_Checkpoint(0, 1) == FTI_DONE, "id 0 again");
    free(arr);
    return finish("id0", "all checks passed", 1);
}

static int rollback(int level) {
    int n = N;
    long counter = 7;
    double *arr = malloc(N * sizeof(double));
    fill(arr, N, 1);
    protect(&n, arr, N, &counter);
    check(FTI_Recover() == FTI_NREC, "nothing to go back to before the first checkpoint");
    char dir[FTI_BUFS];
    check(FTI_GetStageDir(dir, FTI_BUFS) == FTI_NSCS, "no stage directory without enable_staging");
    int extra = FTI_setIDFromString("extra");
    check(extra == 3 && FTI_setIDFromString("extra") == 3, "a name gets the next id, and keeps it");
    check(FTI_getIDFromString("extra") == 3 && FTI_getIDFromString("none") == -1,
          "FTI_getIDFromString");
    check(FTI_setIDFromString("other") == 4, "the next name, the next id");
    check(FTI_Checkpoint(1, level) == FTI_DONE, "a checkpoint");
    fill(arr, N, 2);
    counter = 8;
    check(FTI_Checkpoint(2, level) == FTI_DONE, "a newer checkpoint");
    fill(arr, N, 3);
    counter = 9;
    /* The odd ranks go on; the even ranks roll back on their own. */
    if (rank % 2 == 0) {
        check(FTI_Recover() == FTI_SCES, "FTI_Recover within the run");
        check(counter == 8 && same(arr, N, 2), "the newest checkpoint's values");
    } else {
        check(counter == 9 && same(arr, N, 3), "the ranks that did not roll back keep theirs");
    }
    free(arr);
    return finish("rollback", "all checks passed", 1);
}

static int reinit(const char *config, int level) {
    int n = N;
    long counter = 5;
    double *arr = malloc(N * sizeof(double));
    fill(arr, N, 1);
    protect(&n, arr, N, &counter);
    check(FTI_Checkpoint(1, level) == FTI_DONE, "a checkpoint in the first session");
    fill(arr, N, 2);
    counter = 6;
    check(FTI_Init(config, MPI_COMM_WORLD) == FTI_SCES, "FTI_Init again");
    check(FTI_Status() != 0, "the new session finds the first one's checkpoint");
    protect(&n, arr, N, &counter);
    check(FTI_Recover() == FTI_SCES, "FTI_Recover in the new session");
    check(counter == 5 && same(arr, N, 1), "the first session's checkpoint");
    check(FTI_Checkpoint(2, 1) == FTI_DONE, "the new session checkpoints");
    free(arr);
    return finish("reinit", "all checks passed", 1);
}

/* The final state of staging request id: with head = 1 the move happens
 * in the background (FTI_SI_PEND, then FTI_SI_ACTV), polled for at most a
 * minute. */
static int settled(int id) {
    double until = MPI_Wtime() + 60.0;
    int st = FTI_GetStageStatus(id);
    while ((st == FTI_SI_PEND || st == FTI_SI_ACTV) && MPI_Wtime() < until) {
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
        st = FTI_GetStageStatus(id);
    }
    return st;
}

/* enable_staging = 1: every rank writes a file in the stage directory and
 * moves it to REMOTE with FTI_SendFile. */
static int stage(const char *remote_dir, int background) {
    char dir[FTI_BUFS];
    check(FTI_GetStageDir(dir, 4) == FTI_NSCS, "a buffer too small for the stage directory is refused");
    check(FTI_GetStageDir(dir, FTI_BUFS) == FTI_SCES, "FTI_GetStageDir");
    char local[2 * FTI_BUFS], remote[2 * FTI_BUFS];
    snprintf(local, sizeof local, "%s/out-%d.bin", dir, rank);
    snprintf(remote, sizeof remote, "%s/staged-%d.bin", remote_dir, rank);
    FILE *f = fopen(local, "wb");
    check(f != NULL, "a file in the stage directory");
    if (f) {
        for (int i = 0; i < (3 << 20) / 4; i++) {
            int v = i ^ rank;
            fwrite(&v, sizeof v, 1, f);
        }
        fclose(f);
    }
    int id = FTI_SendFile(local, remote);
    check(id >= 0, "FTI_SendFile");
    check(settled(id) == FTI_SI_SCES, "the request succeeded");
    check(FTI_GetStageStatus(id) == FTI_SI_NINI, "and is forgotten once read");
    FILE *gone = fopen(local, "rb");
    check(gone == NULL, "the file left the stage directory");
    if (gone) fclose(gone);
    check(FTI_SendFile(local, remote) == FTI_NSCS, "a file that is not there is refused");
    check(FTI_SendFile(NULL, remote) == FTI_NSCS, "a null path is refused");
    /* A destination that cannot be written: the call fails (head = 0) or
     * the request does (head = 1, in the background); the file stays. */
    FILE *again = fopen(local, "wb");
    if (again) {
        fputs("kept", again);
        fclose(again);
    }
    int bad = FTI_SendFile(local, "/nonexistent-frame-dir/staged.bin");
    if (background)
        check(bad >= 0 && settled(bad) == FTI_SI_FAIL, "a move that fails in the background ends as failed");
    else
        check(bad == FTI_NSCS, "a move that fails is the call's failure");
    FILE *kept = fopen(local, "rb");
    check(kept != NULL, "and the file stays in the stage directory");
    if (kept) fclose(kept);
    remove(local);
    return finish("stage", "all checks passed", 1);
}

/* keep_last_ckpt = 1: the first run ends normally, the second (after the
 * nodes' storage was wiped) finds the last checkpoint. */
static int keep_first(int level) {
    int n = N;
    long counter = 1;
    double *arr = malloc(N * sizeof(double));
    fill(arr, N, 1);
    protect(&n, arr, N, &counter);
    check(FTI_Checkpoint(1, level) == FTI_DONE, "a checkpoint");
    fill(arr, N, 2);
    counter = 2;
    check(FTI_Checkpoint(2, level) == FTI_DONE, "the last checkpoint");
    fill(arr, N, 3);
    counter = 3;
    free(arr);
    return finish("keep", "first run done", 1);
}

static int keep_restart(void) {
    int n = 0;
    long counter = 0;
    double *arr = calloc(N, sizeof(double));
    protect(&n, arr, N, &counter);
    check(FTI_Recover() == FTI_SCES, "FTI_Recover after the nodes' storage was wiped");
    check(n == N && counter == 2 && same(arr, N, 2), "the last checkpoint of the previous run");
    free(arr);
    return finish("keep", "all checks passed", 1);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s CONFIG MODE LEVEL [REMOTE]\n", argv[0]);
        return 2;
    }
    MPI_Init(&argc, &argv);
    const char *mode = argv[2];
    int level = atoi(argv[3]);
    if (FTI_Init(argv[1], MPI_COMM_WORLD) != FTI_SCES) {
        fprintf(stderr, "fti_semantics: FTI_Init failed\n");
        MPI_Finalize();
        return 3;
    }
    MPI_Comm_rank(FTI_COMM_WORLD, &rank);
    /* FTI's public names, with FTI's values, come with fti.h. */
    check(FTI_ENDW == FTI_BASE + 5 && FTI_REJW == FTI_BASE + 6 &&
              FTI_L4_DCP == FTI_L4 + 4 && FTI_L4_H5_SINGLE == FTI_MAX_LEVEL_ID &&
              FTI_SI_NINI < FTI_SI_FAIL && FTI_HEAD == 2 && FTI_BUFS == 256 &&
              FTI_IO_POSIX == 1001,
          "FTI's public names and values");
    int failed;
    int restart = FTI_Status() != 0;
    if (strcmp(mode, "rollback") == 0) {
        failed = rollback(level);
    } else if (strcmp(mode, "reinit") == 0) {
        failed = reinit(argv[1], level);
    } else if (strcmp(mode, "stage") == 0) {
        failed = stage(argc > 4 ? argv[4] : ".", argc > 5 && strcmp(argv[5], "background") == 0);
    } else if (strcmp(mode, "keep") == 0) {
        failed = restart ? keep_restart() : keep_first(level);
    } else if (!restart) {
        failed = first_run(mode, level, strcmp(mode, "id0") == 0 ? 0 : 1);
    } else if (strcmp(mode, "mixed") == 0) {
        failed = restart_mixed();
    } else if (strcmp(mode, "retry") == 0) {
        failed = restart_retry();
    } else if (strcmp(mode, "id0") == 0) {
        failed = restart_id0();
    } else {
        fprintf(stderr, "fti_semantics: unknown mode %s\n", mode);
        failed = 1;
    }
    MPI_Finalize();
    return failed == 0 ? 0 : 1;
}
