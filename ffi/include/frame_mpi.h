/*
 * frame_mpi.h: an MPI program made resilient with frame_run_ulfm while it
 * keeps making its own MPI calls (an application that was an MPI program
 * before it used frame). Include it after <mpi.h>; build with mpicc or
 * mpicxx and link libframe built with the ulfm feature (docs/ULFM.md).
 *
 * At the top of the resilient function, before its first MPI call:
 *
 *     MPI_Comm comm;
 *     FRAME_MPI_ENTER(ctx, comm);
 *
 * sets comm to the working ranks' communicator of this entry (the job's
 * size and order: frame_mpi_comm) and gives it an error handler. When one
 * of the program's MPI calls on it fails because a process died or the
 * communicator was revoked, however deep in the program, the handler
 * jumps back to FRAME_MPI_ENTER, which returns FRAME_EINTERRUPTED from the
 * resilient function: frame repairs the job and enters the function again
 * (a survivor as FRAME_STATE_REINITED). Any other MPI error ends the job,
 * as MPI's default handler would. Locals of the resilient function that
 * changed after FRAME_MPI_ENTER must not be read after the jump (the
 * function returns at once), and what the abandoned entry allocated is
 * not freed: keep what outlives an entry in the user data.
 *
 * A program whose files say MPI_COMM_WORLD everywhere can keep them as
 * they are: compile every file with -DFRAME_MPI_WORLD -include frame_mpi.h
 * (mpi.h first is not needed then), define the communicator once,
 *
 *     MPI_Comm frame_mpi_world = MPI_COMM_NULL;
 *
 * and enter with FRAME_MPI_ENTER(ctx, frame_mpi_world): every
 * MPI_COMM_WORLD of the program then names the working ranks'
 * communicator (with spare processes, MPI's own world holds more
 * processes than the job has ranks).
 *
 * Only the file that calls FRAME_MPI_ENTER uses the handler; each file
 * that includes this header gets its own (unused) copy.
 */

#ifndef FRAME_MPI_H
#define FRAME_MPI_H

#include <mpi.h>
#include <setjmp.h>
#include <stdio.h>

#include "frame.h"

/* frame_mpi_comm and frame_mpi_failure are declared in frame.h. */

#ifdef FRAME_MPI_WORLD
extern MPI_Comm frame_mpi_world;
#undef MPI_COMM_WORLD
#define MPI_COMM_WORLD frame_mpi_world
#endif

/* Where the handler jumps: the last FRAME_MPI_ENTER of this file. */
static jmp_buf frame_mpi_jump_;

/* The error handler FRAME_MPI_ENTER gives the communicator. */
static void frame_mpi_on_error_(MPI_Comm *comm, int *code, ...) {
    if (frame_mpi_failure(*code)) longjmp(frame_mpi_jump_, 1);
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(*code, text, &len) != MPI_SUCCESS) len = 0;
    text[len] = '\0';
    fprintf(stderr, "frame: an MPI call failed: %s (code %d)\n", text, *code);
    fflush(stderr);
    MPI_Abort(*comm, *code);
}

/* Gives comm the handler; the status of MPI's calls. */
static inline int frame_mpi_catch_(MPI_Comm comm) {
    MPI_Errhandler handler;
    int rc = MPI_Comm_create_errhandler(frame_mpi_on_error_, &handler);
    if (rc != MPI_SUCCESS) return rc;
    rc = MPI_Comm_set_errhandler(comm, handler);
    MPI_Errhandler_free(&handler);
    return rc;
}

/*
 * In the resilient function: sets comm (an MPI_Comm lvalue) and arms the
 * handler; returns from the function with FRAME_EINTERRUPTED when the
 * handler jumps back, with a negative status when the communicator
 * cannot be had.
 */
#define FRAME_MPI_ENTER(ctx, comm)                                                \
    do {                                                                          \
        int frame_mpi_rc_ = frame_mpi_comm((ctx), &(comm));                       \
        if (frame_mpi_rc_ < 0) return frame_mpi_rc_;                              \
        if (setjmp(frame_mpi_jump_) != 0) return FRAME_EINTERRUPTED;              \
        if (frame_mpi_catch_(comm) != MPI_SUCCESS) return FRAME_ERROR;            \
    } while (0)

#endif /* FRAME_MPI_H */
