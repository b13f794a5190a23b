/*
 * veloc.h: VeloC's C API (version 1.8) on frame.
 *
 * Programs written for VeloC compile against this header and link with
 * -lveloc-client (frame's libveloc) unchanged. What each call does on
 * frame, and where it differs from VeloC, is in docs/VELOC_CONFORMANCE.md.
 */
#ifndef FRAME_VELOC_H
#define FRAME_VELOC_H

#include "veloc/defs.h"
#include <mpi.h>
#include <stddef.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Starts libveloc on comm with the configuration file cfg_file (VeloC's
 * keys: scratch, persistent, mode, ...). Collective. */
int VELOC_Init(MPI_Comm comm, const char *cfg_file);

/* Starts libveloc in a process of its own, id among independent ones. */
int VELOC_Init_single(unsigned int id, const char *cfg_file);

/* Ends libveloc; with drain != 0, waits for the checkpoints in flight. */
int VELOC_Finalize(int drain);

/* Protects count elements of base_size bytes at ptr as region id
 * (again: replaces it). */
int VELOC_Mem_protect(int id, void *ptr, size_t count, size_t base_size);

/* Stops protecting region id. */
int VELOC_Mem_unprotect(int id);

/* Writes into routed (VELOC_MAX_NAME bytes) this rank's file of the
 * checkpoint begun, or of the restart begun. */
int VELOC_Route_file(const char *original, char *routed);

/* Forgets the checkpoints named name. Collective. */
int VELOC_Cleanup(const char *name);

/* Begins checkpoint version of name. */
int VELOC_Checkpoint_begin(const char *name, int version);

/* Saves the protected regions mode selects (VELOC_CKPT_*) by ids. */
int VELOC_Checkpoint_selective(int mode, int *ids, int no_ids);

/* Saves every protected region. */
int VELOC_Checkpoint_mem(void);

/* Ends the checkpoint begun. Collective. */
int VELOC_Checkpoint_end(int success);

/* Waits for the checkpoints in flight to reach their levels. Collective. */
int VELOC_Checkpoint_wait(void);

/* 1 once the checkpoints in flight reached their levels. Collective. */
int VELOC_Checkpoint_finished(void);

/* wait, begin, mem and end(1). Collective. */
int VELOC_Checkpoint(const char *name, int version);

/* The newest version of name to restart from (at most version unless 0),
 * or VELOC_FAILURE when there is none. Collective. */
int VELOC_Restart_test(const char *name, int version);

/* Begins restarting from version of name. Collective. */
int VELOC_Restart_begin(const char *name, int version);

/* Restores the protected regions mode selects (VELOC_RECOVER_*). */
int VELOC_Recover_selective(int mode, int *ids, int no_ids);

/* The size in bytes of region id in the restart begun (0: none). */
int VELOC_Recover_size(int id);

/* Restores every protected region the checkpoint holds. */
int VELOC_Recover_mem(void);

/* Ends the restart. */
int VELOC_Restart_end(int success);

/* begin, mem and end(1). Collective. */
int VELOC_Restart(const char *name, int version);

#ifdef __cplusplus
}
#endif

#endif /* FRAME_VELOC_H */
