/*
 * scr_heat.c: 2D heat diffusion written against SCR's API only (scr.h),
 * to run on frame's libscr. Rows are split over the ranks, halos travel
 * with MPI_Sendrecv, and each checkpoint is a dataset "ckpt.<step>" of
 * one file per rank, "ckpt.<step>/rank_<r>.ckpt" below the working
 * directory, written through SCR_Route_file when SCR_Need_checkpoint says
 * so (set SCR_CHECKPOINT_INTERVAL).
 *
 *   mpicc scr_heat.c -lscr -o scr_heat
 *   SCR_CHECKPOINT_INTERVAL=20 mpiexec -n 8 ./scr_heat NX NY STEPS [CRASH_AT]
 *
 * With CRASH_AT, the last rank kills itself with SIGKILL before step
 * CRASH_AT unless the run is a restart (with HEAT_CRASH_NODE=DIR, the last
 * two ranks, DIR moved away first: see heat_crash), which ends the whole
 * MPI job; the same command run again resumes from the newest checkpoint (an older one
 * when a rank finds the newest unreadable: SCR_Complete_restart(0)). Rank
 * 0 prints "restarted at step N in T ms" after a restart (T: SCR_Init and
 * the restart, on the slowest rank), and the last rank the checkpoints'
 * times and "final checksum: 0x..." (FNV-1a over the whole grid), the
 * same in every run. With HEAT_OUTPUT set, every checkpoint is also
 * output (SCR_FLAG_OUTPUT: its files stay in the prefix directory); with
 * HEAT_REJECT=NAME, rank 0 refuses checkpoint NAME on a restart, as
 * a program does that finds its file inconsistent.
 *
 * Built with -DHEAT_ONLINE -DFRAME_MPI_WORLD -include frame_mpi.h and
 * linked with libframe too, the same program runs under frame_run_ulfm
 * (heat_online.h) and recovers online: the survivors and a spare process
 * resume from the newest checkpoint inside the same MPI job.
 */
#include <scr.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heat_mpi.h"

/* Reads the step and this rank's rows from a restart file; 1 if whole. */
static int read_checkpoint(const char *path, int *step, struct heat *grid) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    int ok = fread(step, sizeof(*step), 1, f) == 1 &&
             fread(grid->u, sizeof(double), grid->cells, f) == grid->cells;
    char extra;
    ok = ok && fread(&extra, 1, 1, f) == 0;
    fclose(f);
    return ok;
}

/* Writes the step and this rank's rows; 1 if written whole. */
static int write_checkpoint(const char *path, int step, const struct heat *grid) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int ok = fwrite(&step, sizeof(step), 1, f) == 1 &&
             fwrite(grid->u, sizeof(double), grid->cells, f) == grid->cells;
    return fclose(f) == 0 && ok;
}

/* The program, between MPI_Init and MPI_Finalize. */
static int heat_main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s NX NY STEPS [CRASH_AT]\n", argv[0]);
        return 2;
    }
    double started = MPI_Wtime();
    if (SCR_Init() != SCR_SUCCESS) {
        fprintf(stderr, "scr_heat: SCR_Init failed\n");
        /* SCR_Init fails on every rank alike: end in order. */
        return 3;
    }
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int nx = atoi(argv[1]), ny = atoi(argv[2]), steps = atoi(argv[3]);
    int crash_at = argc > 4 ? atoi(argv[4]) : -1;
    if (nx < size || ny < 1 || steps < 0) {
        if (rank == 0) fprintf(stderr, "scr_heat: need at least one row per rank\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    struct heat grid;
    if (heat_init(&grid, nx, ny, rank, size) != 0) MPI_Abort(MPI_COMM_WORLD, 4);
    const char *reject = getenv("HEAT_REJECT");
    const int flags = SCR_FLAG_CHECKPOINT | (getenv("HEAT_OUTPUT") ? SCR_FLAG_OUTPUT : 0);

    /* The restart: the newest checkpoint, or older ones while a rank
     * cannot read its file. */
    int step = 0, restarted = 0;
    char name[SCR_MAX_FILENAME], path[SCR_MAX_FILENAME + 64], file[SCR_MAX_FILENAME];
    int have = 0, tried = 0;
    if (SCR_Have_restart(&have, name) != SCR_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 5);
    while (have) {
        if (SCR_Start_restart(name) != SCR_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 5);
        tried = 1;
        snprintf(path, sizeof(path), "%s/rank_%d.ckpt", name, rank);
        int valid = SCR_Route_file(path, file) == SCR_SUCCESS && read_checkpoint(file, &step, &grid);
        if (!valid) fprintf(stderr, "scr_heat: rank %d cannot read %s\n", rank, path);
        if (reject && strcmp(reject, name) == 0 && rank == 0) {
            printf("scr_heat: rank 0 rejects %s\n", name);
            valid = 0;
        }
        if (SCR_Complete_restart(valid) == SCR_SUCCESS) {
            restarted = 1;
            break;
        }
        if (SCR_Have_restart(&have, name) != SCR_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 5);
    }
    if (!restarted && tried) {
        /* Every checkpoint was refused: start afresh from a clean grid. */
        step = 0;
        free(grid.u);
        free(grid.next);
        if (heat_init(&grid, nx, ny, rank, size) != 0) MPI_Abort(MPI_COMM_WORLD, 4);
    }
    if (restarted) {
        double mine = MPI_Wtime() - started, slowest = 0.0;
        MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("restarted at step %d in %.1f ms\n", step, slowest * 1e3);
            fflush(stdout);
        }
    }

    int checkpoints = 0;
    double first_checkpoint = 0.0, later_checkpoints = 0.0;
    for (; step < steps; step++) {
        /* Before the step's first call, which is libscr's: a survivor
         * meets the failure there. */
        if (!restarted && step == crash_at) heat_crash("scr_heat", step, rank, size, MPI_COMM_WORLD);
        int need = 0;
        if (SCR_Need_checkpoint(&need) != SCR_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 6);
        if (need) {
            double t = MPI_Wtime();
            snprintf(name, sizeof(name), "ckpt.%d", step);
            if (SCR_Start_output(name, flags) != SCR_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 6);
            snprintf(path, sizeof(path), "%s/rank_%d.ckpt", name, rank);
            int valid = SCR_Route_file(path, file) == SCR_SUCCESS && write_checkpoint(file, step, &grid);
            if (SCR_Complete_output(valid) != SCR_SUCCESS) {
                fprintf(stderr, "scr_heat: rank %d: checkpoint %s failed\n", rank, name);
                MPI_Abort(MPI_COMM_WORLD, 6);
            }
            if (checkpoints++ == 0)
                first_checkpoint = MPI_Wtime() - t;
            else
                later_checkpoints += MPI_Wtime() - t;
        }
        int halt = 0;
        if (SCR_Should_exit(&halt) != SCR_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 6);
        if (halt) {
            if (rank == 0) printf("halted at step %d\n", step);
            break;
        }
        heat_step(&grid, rank, size, MPI_COMM_WORLD);
    }

    heat_report(&grid, checkpoints, first_checkpoint, later_checkpoints, rank, size, MPI_COMM_WORLD);
    int rc = SCR_Finalize();
    free(grid.u);
    free(grid.next);
    return rc == SCR_SUCCESS ? 0 : 1;
}

#ifdef HEAT_ONLINE
#include "heat_online.h"
#else
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rc = heat_main(argc, argv);
    MPI_Finalize();
    return rc;
}
#endif
