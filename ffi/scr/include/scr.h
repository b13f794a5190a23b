/*
 * scr.h: SCR's C API (version 3.1) on frame.
 *
 * Programs written for SCR compile against this header and link with
 * -lscr (frame's libscr) unchanged. What each call does on frame, and
 * where it differs from SCR, is in docs/SCR_CONFORMANCE.md.
 */
#ifndef FRAME_SCR_H
#define FRAME_SCR_H

#include <stdarg.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of SCR's API this header follows. */
#define SCR_VERSION "v3.1.0"

/* Returned by every call that succeeds (others return 1). */
#define SCR_SUCCESS (0)

/* The longest path a call writes into a caller's buffer, with its NUL. */
#define SCR_MAX_FILENAME 1024

/* Dataset flags for SCR_Start_output. */
#define SCR_FLAG_NONE       (0 << 0)
#define SCR_FLAG_CHECKPOINT (1 << 0) /* a dataset to restart from */
#define SCR_FLAG_OUTPUT     (1 << 1) /* files that must reach the prefix */

/* Sets a parameter before SCR_Init ("KEY=VALUE"; "KEY=" unsets it), or
 * returns a copy of its value ("KEY"; free it; NULL when unset). */
const char* SCR_Config(const char* config);

/* SCR_Config with a printf format. */
static inline const char* SCR_Configf(const char* format, ...)
{
  char text[SCR_MAX_FILENAME * 2];
  va_list args;
  va_start(args, format);
  int n = vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  if (n < 0 || (size_t) n >= sizeof(text)) {
    return NULL;
  }
  return SCR_Config(text);
}

/* Starts libscr on MPI_COMM_WORLD after MPI_Init. Collective. */
int SCR_Init(void);

/* Waits for the promotions in flight and ends libscr; the checkpoints
 * stay for the next run. Collective. */
int SCR_Finalize(void);

/* Writes into file (SCR_MAX_FILENAME bytes) where to write, or read back,
 * the file the program names. Local. */
int SCR_Route_file(const char* name, char* file);

/* Whether there is a checkpoint to restart from (*flag), and its name
 * (name: NULL or SCR_MAX_FILENAME bytes). Collective. */
int SCR_Have_restart(int* flag, char* name);

/* Starts reading the checkpoint back (name as in SCR_Have_restart).
 * Collective. */
int SCR_Start_restart(char* name);

/* Ends the restart; valid = 0 on any rank makes SCR_Have_restart offer
 * the next older checkpoint. Collective. */
int SCR_Complete_restart(int valid);

/* Whether it is time to checkpoint (*flag, the same on every rank).
 * Collective. */
int SCR_Need_checkpoint(int* flag);

/* SCR_Start_output(NULL, SCR_FLAG_CHECKPOINT). Collective. */
int SCR_Start_checkpoint(void);

/* SCR_Complete_output. Collective. */
int SCR_Complete_checkpoint(int valid);

/* Starts dataset name (NULL: a name is made up) of the given flags.
 * Collective. */
int SCR_Start_output(const char* name, int flags);

/* Ends the dataset; it counts only if every rank passes valid = 1.
 * Collective. */
int SCR_Complete_output(int valid);

/* Names the checkpoint the next restart reads. Collective. */
int SCR_Current(const char* name);

/* Forgets dataset name (its files stay). Collective. */
int SCR_Drop(const char* name);

/* Forgets dataset name, as SCR_Drop; frame's retention removes its
 * copies in time. Collective. */
int SCR_Delete(const char* name);

/* The version of libscr (do not free). */
char* SCR_Get_version(void);

/* Whether the program should checkpoint and exit now (*flag, the same on
 * every rank). Collective. */
int SCR_Should_exit(int* flag);

#ifdef __cplusplus
}
#endif

#endif /* FRAME_SCR_H */
