/*
 * veloc_heat.c: the 2-D heat solver of examples/c/fti_heat.c written
 * against VeloC's API (veloc.h), for benches/side_by_side/run.sh: the same
 * grid, the same steps, the same checksum, so that one work runs through
 * FTI, VeloC and frame.
 *
 *   mpicc -I examples/c veloc_heat.c -lveloc-client -o veloc_heat
 *   mpiexec -n 8 ./veloc_heat CONFIG NX NY STEPS [CRASH_AT]

 * A checkpoint ("heat", version = step) every HEAT_EVERY steps (default 2),
 * of the protected step and grid, or with HEAT_FILE set of a file per rank
 * written through VELOC_Route_file (VeloC's file mode);
 * with HEAT_WAIT set, each checkpoint also waits for VeloC's background
 * work (flush, erasure coding) to end, and that wait counts in its time.
 * With CRASH_AT, the last rank kills itself before step CRASH_AT unless the
 * run is a restart (with HEAT_CRASH_NODE=DIR, the last two ranks, DIR
 * moved away first: see heat_crash in heat_mpi.h). Built with
 * -DHEAT_ONLINE -DFRAME_MPI_WORLD -include frame_mpi.h and linked with
 * libframe too, it runs under frame_run_ulfm and recovers online
 * (examples/c/heat_online.h). Output lines as fti_heat's: "restarted at step N in T
 * ms" (VELOC_Init and the restart, slowest rank), "checkpoints: K, the
 * first X ms, the later ones Y ms each (slowest rank)", "final checksum:
 * 0x..." (FNV-1a over the grid).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <veloc.h>

#include "heat_mpi.h"

/* The program, between MPI_Init and MPI_Finalize. */
static int heat_main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s CONFIG NX NY STEPS [CRASH_AT]\n", argv[0]);
        return 2;
    }
    double started = MPI_Wtime();
    if (VELOC_Init(MPI_COMM_WORLD, argv[1]) != VELOC_SUCCESS) {
        fprintf(stderr, "veloc_heat: VELOC_Init failed\n");
        /* VELOC_Init fails on every rank alike: end in order. */
        return 3;
    }
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int nx = atoi(argv[2]), ny = atoi(argv[3]), steps = atoi(argv[4]);
    int crash_at = argc > 5 ? atoi(argv[5]) : -1;
    int every = getenv("HEAT_EVERY") ? atoi(getenv("HEAT_EVERY")) : 2;
    const int wait = getenv("HEAT_WAIT") != NULL;
    if (nx < size || ny < 1 || steps < 0 || every < 1) {
        if (rank == 0) fprintf(stderr, "veloc_heat: need a row per rank and HEAT_EVERY >= 1\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    struct heat grid;
    if (heat_init(&grid, nx, ny, rank, size) != 0) MPI_Abort(MPI_COMM_WORLD, 4);

    int step = 0;
    VELOC_Mem_protect(0, &step, 1, sizeof(int));
    VELOC_Mem_protect(1, grid.u, grid.cells, sizeof(double));
    const int in_file = getenv("HEAT_FILE") != NULL;
    int latest = VELOC_Restart_test("heat", 0);
    const int restart = latest > 0;
    if (restart && in_file) {
        /* The file route: this rank's file of the version, read back. */
        char routed[VELOC_MAX_NAME];
        int ok = VELOC_Restart_begin("heat", latest) == VELOC_SUCCESS &&
                 VELOC_Route_file("heat.dat", routed) == VELOC_SUCCESS;
        FILE *f = ok ? fopen(routed, "rb") : NULL;
        ok = f && fread(&step, sizeof(step), 1, f) == 1 &&
             fread(grid.u, sizeof(double), grid.cells, f) == grid.cells;
        if (f) fclose(f);
        if (VELOC_Restart_end(ok) != VELOC_SUCCESS || !ok) {
            fprintf(stderr, "veloc_heat: rank %d: reading version %d back failed\n", rank, latest);
            MPI_Abort(MPI_COMM_WORLD, 5);
        }
    } else if (restart) {
        if (VELOC_Restart("heat", latest) != VELOC_SUCCESS) {
            fprintf(stderr, "veloc_heat: rank %d: restarting from version %d failed\n", rank, latest);
            MPI_Abort(MPI_COMM_WORLD, 5);
        }
    }
    if (restart) {
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
        if ((step + 1) % every == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t = MPI_Wtime();
            /* Versions must grow: the step is one. */
            int rc;
            if (in_file) {
                /* The file route: the step and this rank's rows. */
                char routed[VELOC_MAX_NAME];
                int ok = VELOC_Checkpoint_begin("heat", step) == VELOC_SUCCESS &&
                         VELOC_Route_file("heat.dat", routed) == VELOC_SUCCESS;
                FILE *f = ok ? fopen(routed, "wb") : NULL;
                ok = f && fwrite(&step, sizeof(step), 1, f) == 1 &&
                     fwrite(grid.u, sizeof(double), grid.cells, f) == grid.cells;
                if (f && fclose(f) != 0) ok = 0;
                rc = VELOC_Checkpoint_end(ok);
            } else
                rc = VELOC_Checkpoint("heat", step);
            if (rc == VELOC_SUCCESS && wait) rc = VELOC_Checkpoint_wait();
            if (rc != VELOC_SUCCESS) {
                fprintf(stderr, "veloc_heat: rank %d: checkpoint at step %d failed\n", rank, step);
                MPI_Abort(MPI_COMM_WORLD, 6);
            }
            if (checkpoints++ == 0)
                first_checkpoint = MPI_Wtime() - t;
            else
                later_checkpoints += MPI_Wtime() - t;
        }
        if (!restart && step == crash_at) heat_crash("veloc_heat", step, rank, size, MPI_COMM_WORLD);
        heat_step(&grid, rank, size, MPI_COMM_WORLD);
    }

    heat_report(&grid, checkpoints, first_checkpoint, later_checkpoints, rank, size, MPI_COMM_WORLD);
    VELOC_Finalize(0);
    free(grid.u);
    free(grid.next);
    return 0;
}

#ifdef HEAT_ONLINE
#include "heat_online.h"
#else
int main(int argc, char **argv) {
    /* VeloC's synchronous mode runs its modules on a thread of its own,
     * which may call MPI. */
    int threads;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &threads);
    int rc = heat_main(argc, argv);
    MPI_Finalize();
    return rc;
}
#endif
