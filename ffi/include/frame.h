/*
 * frame.h: the C interface of frame (libframe).
 *
 * Generated from ffi/src by cbindgen; do not edit by hand.
 *
 * Every call returns an int status: FRAME_OK (0) or FRAME_DONE (1) on
 * success, a negative FRAME_E* code on failure, with a message from
 * frame_last_error(). A call that returns FRAME_EINTERRUPTED was cut short
 * by a failure elsewhere in the job: return from the resilient function,
 * and frame_run enters it again once the job recovered.
 */

#ifndef FRAME_H
#define FRAME_H



#include <stdint.h>
#include <stddef.h>

/*
 C `char` (stored as signed 8-bit integers).
 */
#define FRAME_CHAR 1

/*
 C `short`.
 */
#define FRAME_SHORT 2

/*
 C `int`.
 */
#define FRAME_INT 3

/*
 C `long`.
 */
#define FRAME_LONG 4

/*
 C `long long`.
 */
#define FRAME_LLONG 5

/*
 C `unsigned char`.
 */
#define FRAME_UCHAR 6

/*
 C `unsigned short`.
 */
#define FRAME_USHORT 7

/*
 C `unsigned int`.
 */
#define FRAME_UINT 8

/*
 C `unsigned long`.
 */
#define FRAME_ULONG 9

/*
 C `unsigned long long`.
 */
#define FRAME_ULLONG 10

/*
 C `float`.
 */
#define FRAME_FLOAT 11

/*
 C `double`.
 */
#define FRAME_DOUBLE 12

/*
 Opaque bytes (`count` is a number of bytes).
 */
#define FRAME_BYTES 13

/*
 Element-wise sum.
 */
#define FRAME_SUM 1

/*
 Element-wise minimum.
 */
#define FRAME_MIN 2

/*
 Element-wise maximum.
 */
#define FRAME_MAX 3

/*
 First start of the job.
 */
#define FRAME_STATE_NEW 0

/*
 A survivor, rolled back after a failure elsewhere.
 */
#define FRAME_STATE_REINITED 1

/*
 A replacement for a rank that failed.
 */
#define FRAME_STATE_RESTARTED 2

/*
 Success.
 */
#define FRAME_OK 0

/*
 Success, and something was done: `frame_snapshot` wrote a checkpoint,
 `frame_status` found a checkpoint to recover.
 */
#define FRAME_DONE 1

/*
 A failure of the library (storage, configuration, a peer); see
 `frame_last_error`.
 */
#define FRAME_ERROR -1

/*
 A bad argument: a null pointer, an unknown type, a negative count or id.
 */
#define FRAME_EINVAL -2

/*
 A call out of order: before `frame_init`, after `frame_finalize`, from a
 thread that did not initialise, or with a context that is not the live
 one.
 */
#define FRAME_ESTATE -3

/*
 A failure elsewhere in the job interrupted the call: return from the
 resilient function (with any value); `frame_run` enters it again once
 the job recovered.
 */
#define FRAME_EINTERRUPTED -4

/*
 The protected regions do not match the checkpoint being restored.
 */
#define FRAME_EMISMATCH -5

/*
 There is no checkpoint to recover.
 */
#define FRAME_ENOREC -6

/*
 An internal error of the library (a bug); the call had no effect.
 */
#define FRAME_EINTERNAL -7

/*
 This libframe was built without what the call needs (`frame_run_ulfm`
 without the `ulfm` feature).
 */
#define FRAME_EUNSUPPORTED -8

/*
 The opaque context handle of the C interface.
 */
typedef struct frame_ctx frame_ctx;

/*
 The resilient function: `ctx` is valid until it returns; `state` is a
 `FRAME_STATE_*` value; `failed_ranks` holds `n_failed` ranks (the
 failures recovered just before this entry). Return 0 when done; any
 other value stops the job with an error, unless a failure interrupted
 the function (a call returned `FRAME_EINTERRUPTED`), in which case it is
 entered again once the job recovered.
 */
typedef int (*frame_main_fn)(struct frame_ctx *ctx,
                             int state,
                             int n_failed,
                             const int *failed_ranks,
                             void *user_data);

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

/*
 Sets up checkpointing on this thread, and finds out with the other
 ranks whether there is a checkpoint to recover (see `frame_status`).
 Collective.

 `config_path` is a TOML configuration file, or NULL for the defaults
 (and `FRAME_CONFIG`, which `frame run` sets). `ctx` is the handle given to
 the resilient function by `frame_run`, or NULL outside the runtime (the
 program is then a single rank).
 */
int frame_init(const char *config_path, struct frame_ctx *ctx);

/*
 Protects `count` elements of `type` at `ptr` as region `id` (a number
 of your choice, at least 0). Protecting an id again replaces the region
 (to change its size or place). The memory must stay valid until it is
 protected again or `frame_finalize` is called.
 */
int frame_protect(int id, void *ptr, int64_t count, int type);

/*
 Call once per iteration of the main loop: writes a checkpoint when the
 configured interval says so. Returns `FRAME_DONE` when it wrote one,
 `FRAME_OK` when not. Collective.
 */
int frame_snapshot(void);

/*
 Waits until every node's manager has finished the promotions to levels
 2-4 asked of it so far (returns at once with level 1 only). For a
 program that wants its checkpoints beyond its node before going on,
 and for tests that kill a node once they are. Collective.
 */
int frame_wait_promotions(void);

/*
 Writes a checkpoint now and has it kept at `level` (1 to 4) besides the
 levels whose interval is due. `id` must be positive; frame numbers its
 checkpoints itself and returns `FRAME_OK`. Collective.
 */
int frame_checkpoint(int id, int level);

/*
 `FRAME_DONE` (1) if `frame_init` found a checkpoint to recover that has
 not been recovered yet, `FRAME_OK` (0) if not.
 */
int frame_status(void);

/*
 Restores every protected region from the checkpoint found by
 `frame_init`. Every stored region must be protected with the same type
 and count (`FRAME_EMISMATCH` otherwise; see `frame_stored_size`).
 Collective.
 */
int frame_recover(void);

/*
 Restores region `id` alone from the checkpoint found by `frame_init`.
 Not collective.
 */
int frame_recover_var(int id);

/*
 The size in bytes of region `id` in the checkpoint to recover (to size
 a buffer before protecting it), or a negative status.
 */
int64_t frame_stored_size(int id);

/*
 Ends checkpointing on this thread: waits for background promotions and
 removes the job's checkpoints unless configured to keep them.
 Collective.
 */
int frame_finalize(void);

/*
 This process's rank in the job (0 to size - 1), or a negative status.
 */
int frame_rank(struct frame_ctx *ctx);

/*
 The number of ranks in the job, or a negative status.
 */
int frame_size(struct frame_ctx *ctx);

/*
 Sends `bytes` bytes at `buf` to rank `dest` with tag `tag` (at least
 0). Returns once the bytes are handed over (it does not wait for the
 receiver).
 */
int frame_send(struct frame_ctx *ctx, int dest, int tag, const void *buf, int64_t bytes);

/*
 Receives the next message from rank `src` with tag `tag` into `buf`,
 which must have exactly the message's size `bytes`.
 */
int frame_recv(struct frame_ctx *ctx, int src, int tag, void *buf, int64_t bytes);

/*
 Sends `send_bytes` at `send_buf` to `dest` and receives `recv_bytes`
 into `recv_buf` from `src`, both with `tag` (safe in any order).
 */
int frame_sendrecv(struct frame_ctx *ctx,
                   const void *send_buf,
                   int64_t send_bytes,
                   int dest,
                   void *recv_buf,
                   int64_t recv_bytes,
                   int src,
                   int tag);

/*
 Waits until every rank entered the barrier.
 */
int frame_barrier(struct frame_ctx *ctx);

/*
 Reduces `n` 64-bit integers at `values` element-wise over all ranks with
 `op` (`FRAME_SUM`, `FRAME_MIN`, `FRAME_MAX`); every rank gets the result
 in place.
 */
int frame_allreduce_i64(struct frame_ctx *ctx, int64_t *values, int64_t n, int op);

/*
 Like `frame_allreduce_i64`, for doubles.
 */
int frame_allreduce_f64(struct frame_ctx *ctx, double *values, int64_t n, int op);

/*
 Call once per iteration with its number: shows the job's progress, fires
 fault injections set for this iteration (`frame run --inject`), and
 returns `FRAME_EINTERRUPTED` when a failure elsewhere started a
 recovery.
 */
int frame_fault_point(struct frame_ctx *ctx, int64_t iteration);

/*
 Begins a checkpoint of files, kept at `level` (1 to 4) besides the
 levels whose interval is due; it also holds the protected regions.
 Until `frame_end_checkpoint`, `frame_snapshot` and `frame_checkpoint`
 are refused. Not collective.
 */
int frame_begin_checkpoint(int level);

/*
 Writes into `path` (a buffer of `size` bytes; 4096 is always enough)
 the path at which to write file `name` of the checkpoint begun: a new,
 empty, private file on the node's storage. `name` is one file name
 (no `/`, not starting with `.`, at most 255 bytes). Not collective.
 */
int frame_checkpoint_file(const char *name, char *path, size_t size);

/*
 Ends the checkpoint begun: saves every file named (kept by the
 checkpoint as written when it stays on the node, saved into it and
 removed otherwise; either way gone from its path) with the protected
 regions, and commits it on every rank. Returns the checkpoint's id
 (positive), or a negative status. The program must have closed the
 files, and must not write to them afterwards. Collective.
 */
int64_t frame_end_checkpoint(void);

/*
 After `frame_recover`, writes into `path` (a buffer of `size` bytes)
 the path of file `name` as the restored checkpoint held it.
 `FRAME_EINVAL` when it held no such file on this rank. Not collective.
 */
int frame_recovered_file(const char *name, char *path, size_t size);

/*
 Writes into `*comm` (an `MPI_Comm` of the MPI the program and libframe
 were built with) a communicator of the working ranks, of the job's
 size and order, for the program's own MPI calls in this entry of the
 resilient function: where an MPI program used `MPI_COMM_WORLD` (which,
 with spare processes, holds more processes than the job's ranks). Its
 errors return rather than abort (see `frame_mpi_failure`); when the
 resilient function returns after an error, frame revokes it, so every
 other rank's pending call on it fails too. The first call in an entry
 is collective. Valid until the function returns; never free it.
 `FRAME_EUNSUPPORTED` outside `frame_run_ulfm`.
 */
int frame_mpi_comm(struct frame_ctx *ctx, void *comm);

/*
 For a library the program calls from its resilient function without
 a context handle (libscr's `SCR_Init` takes no communicator): writes
 into `*epoch` the epoch of the entry running on this thread (1 at the
 start, one more after each recovery: a library's state from an earlier
 epoch belongs to an entry that a failure abandoned), and, unless `comm`
 is NULL, into `*comm` (an `MPI_Comm`) the program's communicator of the
 entry as `frame_mpi_comm` gives it (its first call in an entry is
 collective; with `comm` NULL the call is local). `FRAME_ESTATE` when no
 resilient function runs on this thread; `FRAME_EUNSUPPORTED` outside
 `frame_run_ulfm`. Those two are answers, not failures: the message
 `frame_last_error` gives stays the program's.
 */
int frame_mpi_running(void *comm, uint64_t *epoch);

/*
 Whether the program's calls on its MPI communicator of the running
 entry (the one `frame_mpi_comm` gave) must end: a rank revoked it, or
 MPI knows that one of its processes failed. Then writes it into
 `*comm` (an `MPI_Comm`) and returns the code of an MPI error of class
 revoked or process failed, for the program to raise on it
 (`MPI_Comm_call_errhandler`); else 0 (also outside a resilient
 function, and before `frame_mpi_comm`). A local call, for a program's
 loop that waits for MPI requests: MPI may leave a send to a rank that
 left the communicator pending after the revoke, and a wait for a live
 peer would last until that peer learns of the failure itself.
 */
int frame_mpi_interrupted(void *comm);

/*
 1 if MPI's error code `code` means that a process of the job failed or
 that a rank revoked the communicator (the job repairs: return from the
 resilient function), 0 for any other code (a fault of the call itself).
 Always 0 without the `ulfm` feature.
 */
int frame_mpi_failure(int code);

/*
 Runs `resilient_main` under frame's runtime and returns the process's
 exit status (0 on success).

 Under `frame run` this process is one rank: the function is entered
 with the job's context, and entered again after every failure. Started
 on its own, the program is the only rank and the function runs once.
 `argc` and `argv` are the program's arguments (they are not changed;
 NULL `argv` is allowed).
 */
int frame_run(int argc, char **argv, frame_main_fn resilient_main, void *user_data);

/*
 Runs `resilient_main` in an MPI job that repairs itself after a
 process failure (started by `mpirun --with-ft ulfm`; docs/ULFM.md) and
 returns the process's exit status (0 on success), as `frame_run` does
 under frame's own runtime: after a failure the survivors enter the
 function again (`FRAME_STATE_REINITED`) and a spare or new process takes
 each failed rank (`FRAME_STATE_RESTARTED`); `ctx`'s communicator is the
 working ranks', of the job's size and order.

 Initialises MPI unless the program did (then the program finalises
 it). The job's layout (spares, new processes, nodes, error scope) is
 `[ulfm]` of the configuration at `config_path`, or NULL for the
 defaults and `FRAME_CONFIG`, read as `frame_init` reads it. After a
 recovery the process ends inside this call (MPI can hang in
 `MPI_Finalize` once a process died), with the status it would return.
 Returns `FRAME_EUNSUPPORTED` if libframe was built without the `ulfm`
 feature.
 */
int frame_run_ulfm(int argc,
                   char **argv,
                   const char *config_path,
                   frame_main_fn resilient_main,
                   void *user_data);

/*
 The message of the last call that failed on this thread (an empty
 string if none did). The text stays valid until the next failing call
 on this thread.
 */
const char *frame_last_error(void);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* FRAME_H */
