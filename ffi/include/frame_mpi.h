/*
 * frame_mpi.h: an MPI program made resilient with frame_run_ulfm while it
 * keeps making its own MPI calls (an application that was an MPI program
 * before it used frame). It includes <mpi.h> and frame.h; build with
 * mpicc or mpicxx and link libframe built with the ulfm feature
 * (docs/ULFM.md).
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
 * they are: compile every file with -DFRAME_MPI_WORLD -include frame_mpi.h,
 * define the communicator once,
 *
 *     MPI_Comm frame_mpi_world = MPI_COMM_NULL;
 *
 * and enter with FRAME_MPI_ENTER(ctx, frame_mpi_world): every
 * MPI_COMM_WORLD of the program then names the working ranks'
 * communicator (with spare processes, MPI's own world holds more
 * processes than the job has ranks).
 *
 * MPI_Send, MPI_Recv, MPI_Sendrecv, MPI_Wait and MPI_Waitall in the
 * files that include this header wait by testing, so that a revoked
 * communicator, or a failed process anywhere in it, always ends them (see
 * frame_mpi_settle_ below); collectives are MPI's own.
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

/* frame_mpi_comm, frame_mpi_failure and frame_mpi_interrupted are
 * declared in frame.h. */

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
 * The program's blocking point-to-point calls, as requests waited for by
 * testing: Open MPI 5 can leave a send to a rank that left the
 * communicator pending after the communicator was revoked (the receiver
 * returned from the resilient function and will never match it), and a
 * wait for a live peer lasts until that peer learns of a failure itself.
 * So the wait also asks frame every 16 tests whether the program's
 * communicator was revoked or lost a process, and raises the error on it
 * (the handler jumps). Define FRAME_MPI_NO_WAIT before including this
 * header to keep MPI's own.
 */
static inline int frame_mpi_settle_(int n, MPI_Request *requests, MPI_Status *statuses) {
    for (unsigned i = 1;; i++) {
        int done = 0;
        int rc = MPI_Testall(n, requests, &done, statuses);
        if (rc != MPI_SUCCESS || done) return rc;
        if (i % 16 == 0) {
            MPI_Comm comm;
            int code = frame_mpi_interrupted(&comm);
            if (code > 0) {
                MPI_Comm_call_errhandler(comm, code);
                return code;
            }
        }
    }
}

static inline int frame_mpi_wait_(MPI_Request *request, MPI_Status *status) {
    return frame_mpi_settle_(1, request, status == MPI_STATUS_IGNORE ? MPI_STATUSES_IGNORE : status);
}

static inline int frame_mpi_send_(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                                  MPI_Comm comm) {
    MPI_Request request;
    int rc = MPI_Isend(buf, count, type, dest, tag, comm, &request);
    return rc != MPI_SUCCESS ? rc : frame_mpi_settle_(1, &request, MPI_STATUSES_IGNORE);
}

static inline int frame_mpi_recv_(void *buf, int count, MPI_Datatype type, int source, int tag,
                                  MPI_Comm comm, MPI_Status *status) {
    MPI_Request request;
    int rc = MPI_Irecv(buf, count, type, source, tag, comm, &request);
    return rc != MPI_SUCCESS ? rc : frame_mpi_wait_(&request, status);
}

static inline int frame_mpi_sendrecv_(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                      int dest, int sendtag, void *recvbuf, int recvcount,
                                      MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm,
                                      MPI_Status *status) {
    MPI_Request requests[2];
    MPI_Status statuses[2];
    int rc = MPI_Irecv(recvbuf, recvcount, recvtype, source, recvtag, comm, &requests[0]);
    if (rc != MPI_SUCCESS) return rc;
    rc = MPI_Isend(sendbuf, sendcount, sendtype, dest, sendtag, comm, &requests[1]);
    if (rc != MPI_SUCCESS) return rc;
    rc = frame_mpi_settle_(2, requests, statuses);
    if (rc == MPI_SUCCESS && status != MPI_STATUS_IGNORE) *status = statuses[0];
    return rc;
}

#ifndef FRAME_MPI_NO_WAIT
#define MPI_Send frame_mpi_send_
#define MPI_Recv frame_mpi_recv_
#define MPI_Sendrecv frame_mpi_sendrecv_
#define MPI_Wait frame_mpi_wait_
#define MPI_Waitall frame_mpi_settle_
#endif

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
