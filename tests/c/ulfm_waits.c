/*
 * A failure that no survivor's own call involves, under frame_run_ulfm
 * with frame_mpi.h. Run as `mpirun --with-ft ulfm -n P` with
 * FRAME_ULFM_SPARES=1: the last working rank kills itself on its first
 * entry; rank 1 then waits by testing a receive from rank 0 (MPI's own
 * MPI_Test, which only a revoke ends); every other survivor waits in
 * MPI_Recv for rank 1 (frame_mpi.h's waiting call). No call of any
 * survivor names the dead rank, so the job repairs only if a survivor
 * that waits for a live peer learns of the failure from frame
 * (frame_mpi_interrupted); if none does, the job waits forever. With
 * the argument --direct, rank 0 waits for the rank that dies instead, and
 * learns of the failure from MPI itself.
 *
 * In the next entry the ranks sum their numbers, and rank 0 prints
 * "ulfm_waits: entry STATE, N ranks (sum S), F failed, first R".
 */
#include "frame_mpi.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int waits(frame_ctx *ctx, int state, int n_failed, const int *failed, void *user) {
    MPI_Comm comm;
    FRAME_MPI_ENTER(ctx, comm);
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (state == FRAME_STATE_NEW) {
        /* Every process past its start before one dies. */
        MPI_Barrier(comm);
        if (rank == size - 1) raise(SIGKILL);
        int value = 0;
        if (rank == 1) {
            MPI_Request request;
            MPI_Irecv(&value, 1, MPI_INT, 0, 7, comm, &request);
            for (int done = 0; !done;) MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        } else {
            int peer = rank == 0 && *(const int *)user ? size - 1 : 1;
            MPI_Recv(&value, 1, MPI_INT, peer, 7, comm, MPI_STATUS_IGNORE);
        }
        /* No rank sends: only a failure ends the waits. */
        fprintf(stderr, "ulfm_waits: rank %d received %d, which nobody sent\n", rank, value);
        return 1;
    }
    /* Memory to give back at the end, as an application's. */
    size_t held = (size_t)((const int *)user)[1] << 20;
    char *memory = malloc(held);
    if (memory != NULL) memset(memory, 1, held);
    int sum = 0;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, comm);
    if (rank == 0)
        printf("ulfm_waits: entry %d, %d ranks (sum %d), %d failed, first %d\n", state, size, sum,
               n_failed, n_failed > 0 ? failed[0] : -1);
    return 0;
}

int main(int argc, char **argv) {
    int options[2] = {0, 0}; /* --direct, --hold MIB */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--direct") == 0) options[0] = 1;
        if (strcmp(argv[i], "--hold") == 0 && i + 1 < argc) options[1] = atoi(argv[++i]);
    }
    return frame_run_ulfm(argc, argv, NULL, waits, options);
}
