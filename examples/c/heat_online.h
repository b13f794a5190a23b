/*
 * heat_online.h: main() for an MPI heat program that recovers online
 * under frame_run_ulfm, included instead of its plain main() when built
 * with -DHEAT_ONLINE. The program's work is heat_main(argc, argv), with
 * every MPI call on MPI_COMM_WORLD: the file is compiled with
 *
 *   mpicc -DHEAT_ONLINE -DFRAME_MPI_WORLD -include frame_mpi.h ... -lframe
 *
 * so that MPI_COMM_WORLD names the working ranks' communicator of each
 * entry (frame_mpi.h), and SCR's or VeloC's library, called inside the
 * entry, checkpoints on it. When a rank dies, every MPI call that meets
 * the failure leaves heat_main through FRAME_MPI_ENTER; frame repairs the
 * job (a spare process takes the dead rank's place) and enters again:
 * the library finds the newest checkpoint as it would in a relaunch, and
 * heat_main resumes from it. Rank 0 prints "entered state S (N failed
 * rank(s), first R)" on every entry after a recovery. What an abandoned
 * entry allocated (the grid) is not freed.
 */
#ifndef FRAME_HEAT_ONLINE_H
#define FRAME_HEAT_ONLINE_H

MPI_Comm frame_mpi_world = MPI_COMM_NULL;

/* The program's arguments, for every entry. */
struct heat_args {
    int argc;
    char **argv;
};

static int heat_main(int argc, char **argv);

static int heat_online_entry(frame_ctx *ctx, int state, int n_failed, const int *failed, void *data) {
    FRAME_MPI_ENTER(ctx, frame_mpi_world);
    if (state != FRAME_STATE_NEW) {
        int rank;
        MPI_Comm_rank(frame_mpi_world, &rank);
        if (rank == 0) {
            printf("entered state %d (%d failed rank(s), first %d)\n", state, n_failed, n_failed > 0 ? failed[0] : -1);
            fflush(stdout);
        }
    }
    const struct heat_args *args = data;
    return heat_main(args->argc, args->argv);
}

int main(int argc, char **argv) {
    struct heat_args args = {argc, argv};
    /* frame_run_ulfm initialises MPI and finalises it; after a recovery
     * the process ends inside it. */
    return frame_run_ulfm(argc, argv, NULL, heat_online_entry, &args);
}

#endif
