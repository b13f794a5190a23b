/* veloc/defs.h: VeloC's constants (version 1.8) for programs on frame's
 * libveloc. */
#ifndef FRAME_VELOC_DEFS_H
#define FRAME_VELOC_DEFS_H

#define VELOC_SUCCESS (0)
#define VELOC_FAILURE (-1)
#define VELOC_MAX_NAME (1024)

/* Which protected regions VELOC_Recover_selective restores. */
#define VELOC_RECOVER_ALL (0)
#define VELOC_RECOVER_SOME (1)
#define VELOC_RECOVER_REST (2)

/* Which protected regions VELOC_Checkpoint_selective saves. */
#define VELOC_CKPT_ALL (0)
#define VELOC_CKPT_SOME (1)
#define VELOC_CKPT_REST (2)

#endif
