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
 * CRASH_AT unless the run is a restart (see heat_crash in heat_mpi.h),
 * which ends the whole MPI job; the
 * same command run again resumes from the newest checkpoint. Rank 0 prints
 * "restarted at step N in T ms" after a recovery (T: FTI_Init and the
 * recovery, on the slowest rank), at the end the time of the first
 * checkpoint (new files) and the later ones' mean (files reused), on the
 * slowest rank (with FTI_HEAT_BARRIER set, a barrier before each
 * FTI_Snapshot keeps the wait for slower ranks out of that time), and "final checksum: 0x..." (FNV-1a over the whole grid),
 * the same in every run (the last rank prints these two lines).
 *
 * With FTI_HEAT_LEVEL=L (1 to 4) the program checkpoints itself instead:
 * FTI_Checkpoint(step, L) every FTI_HEAT_EVERY steps (default 2), and a
 * restart begins with FTI_Recover. FTI's own intervals are minutes; this
 * gives FTI and libfti the same checkpoints (benches/side_by_side). With
 * FTI_HEAT_LEVELS=L,L,... (up to 16 levels of 1 to 4) the checkpoints
 * take those levels in turn instead: "2,3,2,4" puts every checkpoint at
 * a level above 1, every second at level 3 or 4 and every fourth at 4.
 */
#include <fti.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "heat_mpi.h"

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
    struct heat grid;
    if (heat_init(&grid, nx, ny, rank, size) != 0) MPI_Abort(MPI_COMM_WORLD, 4);

    int step = 0;
    const int restart = FTI_Status() != 0;
    int announce = restart;
    FTI_Protect(0, &step, 1, FTI_INTG);
    FTI_Protect(1, grid.u, (int64_t)grid.cells, FTI_DBLE);

    const int barrier = getenv("FTI_HEAT_BARRIER") != NULL;
    int level = getenv("FTI_HEAT_LEVEL") ? atoi(getenv("FTI_HEAT_LEVEL")) : 0;
    const int every = getenv("FTI_HEAT_EVERY") ? atoi(getenv("FTI_HEAT_EVERY")) : 2;
    int levels[16], nlevels = 0;
    const char *cycle = getenv("FTI_HEAT_LEVELS");
    for (const char *c = cycle; c && *c && nlevels < 16;) {
        char *end;
        long l = strtol(c, &end, 10);
        if (end == c || l < 1 || l > 4) { nlevels = -1; break; }
        levels[nlevels++] = (int)l;
        c = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') { nlevels = -1; break; }
    }
    if (cycle && nlevels < 1) {
        if (rank == 0) fprintf(stderr, "fti_heat: FTI_HEAT_LEVELS must list 1 to 16 levels of 1 to 4, comma-separated\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (nlevels > 0) level = levels[0];
    if (level < 0 || level > 4 || every < 1) {
        if (rank == 0) fprintf(stderr, "fti_heat: FTI_HEAT_LEVEL must be 1 to 4, FTI_HEAT_EVERY positive\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* The step a restart resumes at was checkpointed already. */
    int resumed = -1;
    if (level && restart) {
        if (FTI_Recover() != FTI_SCES) {
            fprintf(stderr, "fti_heat: rank %d: FTI_Recover failed\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 5);
        }
        resumed = step;
    }
    int checkpoints = 0;
    double first_checkpoint = 0.0, later_checkpoints = 0.0;
    for (; step < steps; step++) {
        /* With FTI_HEAT_BARRIER set, every rank arrives first, so that the
         * time of FTI_Snapshot is the checkpoint's, not the wait for the
         * slowest rank's step. */
        if (barrier || level) MPI_Barrier(FTI_COMM_WORLD);
        double t = MPI_Wtime();
        if (!level)
            rc = FTI_Snapshot();
        else if ((step + 1) % every == 0 && step != resumed) {
            rc = FTI_Checkpoint(step, nlevels > 0 ? levels[(step / every) % nlevels] : level);
            if (rc == FTI_SCES) rc = FTI_DONE;
        } else
            rc = FTI_SCES;
        if (rc != FTI_SCES && rc != FTI_DONE) {
            fprintf(stderr, "fti_heat: rank %d: %s returned %d\n", rank, level ? "FTI_Checkpoint" : "FTI_Snapshot", rc);
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
        if (!restart && step == crash_at) heat_crash("fti_heat", step, rank, size, FTI_COMM_WORLD);
        heat_step(&grid, rank, size, FTI_COMM_WORLD);
    }

    heat_report(&grid, checkpoints, first_checkpoint, later_checkpoints, rank, size, FTI_COMM_WORLD);
    rc = FTI_Finalize();
    free(grid.u);
    free(grid.next);
    MPI_Finalize();
    return rc == FTI_SCES ? 0 : 1;
}
