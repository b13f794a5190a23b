/*
 * fti.h: frame's FTI-compatible C interface (libfti).
 *
 * Programs written for FTI 1.6 compile against this header and link with
 * -lfti unchanged. frame reads FTI's INI configuration file, checkpoints
 * the protected variables to node-local storage, promotes them to partner
 * copies, Reed-Solomon groups and the global directory in the background,
 * and after the job is killed and run again recovers them from the lowest
 * level that still holds them. See docs/FTI.md in frame's source.
 */
#ifndef FRAME_FTI_H
#define FRAME_FTI_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes. */
#define FTI_SCES 0  /* success */
#define FTI_NSCS -1 /* failure (a message names the call and the cause) */
#define FTI_DONE 1  /* a checkpoint was written */
#define FTI_NREC -2 /* nothing to recover */
#define FTI_HEAD 2  /* FTI's code for a dedicated rank (libfti's never return) */

/* Sizes FTI's header gives programs. */
#define FTI_BUFS 256
#define FTI_WORD 16

/* States of a staged file (FTI's values). */
#define FTI_SI_FAIL 0x4
#define FTI_SI_SCES 0x3
#define FTI_SI_ACTV 0x2
#define FTI_SI_PEND 0x1
#define FTI_SI_NINI 0x0

/* Message levels (FTI's verbosity classes). */
#define FTI_EROR 4
#define FTI_WARN 3
#define FTI_INFO 2
#define FTI_DBUG 1
#define FTI_IDCP 5

/* Tokens FTI's ranks and heads exchange (FTI's values; frame's managers
 * speak their own protocol, these are for programs that name them). */
#define FTI_BASE 990
#define FTI_CKTW 991
#define FTI_XORW 992
#define FTI_RSEW 993
#define FTI_PFSW 994
#define FTI_ENDW 995
#define FTI_REJW 996

/* Values of [basic] ckpt_io. */
#define FTI_IO_POSIX 1001
#define FTI_IO_MPI 1002
#define FTI_IO_FTIFF 1003
#define FTI_IO_SIONLIB 1004
#define FTI_IO_HDF5 1005
#define FTI_IO_IME 1006

/* Checkpoint levels, as FTI numbers them: FTI_Checkpoint takes any. The
 * differential forms and FTI_L4_H5_SINGLE are written as the plain level
 * (see docs/FTI.md). */
typedef enum {
    FTI_L1 = 1,
    FTI_L2,
    FTI_L3,
    FTI_L4,
    FTI_L1_DCP,
    FTI_L2_DCP,
    FTI_L3_DCP,
    FTI_L4_DCP,
    FTI_L4_H5_SINGLE,
    FTI_MIN_LEVEL_ID = FTI_L1,
    FTI_MAX_LEVEL_ID = FTI_L4_H5_SINGLE
} FTIT_level;

/* A data type handle. */
typedef int fti_id_t;
#define FTIT_type fti_id_t

/* A group of FTI's HDF5 output (a name in a tree of names), as programs
 * declare them for FTI_InitCompositeType. */
typedef struct FTIT_H5Group {
    int id;                    /* the group's number */
    char name[FTI_BUFS];       /* its name */
    char fullName[FTI_BUFS];   /* its path from the root group */
    int childrenNo;            /* how many groups it holds */
    int childrenID[FTI_BUFS];  /* their numbers */
} FTIT_H5Group;

/* The program's communicator (all ranks but the dedicated ones of head = 1),
 * set by FTI_Init. */
extern MPI_Comm FTI_COMM_WORLD;

/* Handles of the basic C types. */
extern fti_id_t FTI_CHAR; /* char */
extern fti_id_t FTI_SHRT; /* short */
extern fti_id_t FTI_INTG; /* int */
extern fti_id_t FTI_LONG; /* long */
extern fti_id_t FTI_UCHR; /* unsigned char */
extern fti_id_t FTI_USHT; /* unsigned short */
extern fti_id_t FTI_UINT; /* unsigned int */
extern fti_id_t FTI_ULNG; /* unsigned long */
extern fti_id_t FTI_SFLT; /* float */
extern fti_id_t FTI_DBLE; /* double */
extern fti_id_t FTI_LDBE; /* long double */

/* Reads configFile (FTI's INI format), sets FTI_COMM_WORLD, starts the
 * managers and finds a checkpoint to recover. FTI_NREC when the file asks
 * for a restart but nothing is recoverable, or when the job's checkpoints
 * exist but some rank cannot restore any of them (the message names the
 * ranks and the levels tried; nothing is deleted, and FTI stays
 * uninitialised). With head = 1 the first rank of every node serves as its
 * manager and does not return. Called again without FTI_Finalize, it
 * starts a new session, which finds the previous one's checkpoints (not
 * with head = 1). [restart] failure = 0 starts a new execution (its
 * exec_id written into the file), 1 or 2 continues the one exec_id names.
 * Collective. */
int FTI_Init(const char *configFile, MPI_Comm globalComm);

/* 1 on a restart until FTI_Recover (or the first FTI_Snapshot) loaded the
 * checkpoint, else 0; recovering variable by variable leaves it at 1. */
int FTI_Status(void);

/* Registers a type of size bytes; its handle is stored in *type. */
int FTI_InitType(fti_id_t *type, int size);

/* Sizes of data sets (HDF5's hsize_t). */
typedef uint64_t FTIT_hsize_t;

/* A variable's data set dimensions and name (FTI_SetAttribute). */
typedef struct FTIT_dimension {
    int ndims;
    uint64_t count[32];
} FTIT_dimension;

typedef struct FTIT_attribute {
    FTIT_dimension dim;
    char name[FTI_BUFS];
} FTIT_attribute;

typedef enum FTIT_attributeFlag {
    FTI_ATTRIBUTE_NAME = 1 << 0,
    FTI_ATTRIBUTE_DIM = 1 << 1,
} FTIT_attributeFlag;

/* Groups, names and shapes for FTI's HDF5 output: frame writes no HDF5,
 * keeps the names and checks that a shape holds its variable. */
int FTI_InitGroup(FTIT_H5Group *h5group, const char *name, FTIT_H5Group *parent);
int FTI_RenameGroup(FTIT_H5Group *h5group, const char *name);
int FTI_DefineDataset(int id, int rank, int *dimLength, const char *name, FTIT_H5Group *h5group);
int FTI_SetAttribute(int id, FTIT_attribute attribute, FTIT_attributeFlag flag);

/* Global data sets: an array of rank dimensions (dimLength, outermost
 * first) of elements of type tid, shared by the ranks; FTI_AddSubset makes
 * protected variable id the hyperslab (offset, count) of global data set
 * did. With h5_single_file_enable = 1, FTI_Checkpoint(id, FTI_L4_H5_SINGLE)
 * also writes every global data set whole into one file set
 * (<h5_single_file_dir>/<prefix>-ID<id>.frame/), and a run on any number
 * of ranks with [restart] failure = 3 recovers each variable's subset from
 * the newest one (FTI_RecoverDatasetDimension gives it the stored
 * dimensions first). */
int FTI_DefineGlobalDataset(int id, int rank, FTIT_hsize_t *dimLength, const char *name,
                            FTIT_H5Group *h5group, fti_id_t tid);
int FTI_AddSubset(int id, int rank, FTIT_hsize_t *offset, FTIT_hsize_t *count, int did);
int FTI_UpdateSubset(int id, int rank, FTIT_hsize_t *offset, FTIT_hsize_t *count, int did);
int FTI_UpdateGlobalDataset(int id, int rank, FTIT_hsize_t *dimLength);
int FTI_GetDatasetRank(int did);
/* The dimensions of global data set did (rank of them), or NULL; valid
 * until the next call for did. */
FTIT_hsize_t *FTI_GetDatasetSpan(int did, int rank);
int FTI_RecoverDatasetDimension(int did);

/* A composite type (a structure) of size bytes, described field by field
 * for FTI's HDF5 output; frame stores its bytes. h5g may be NULL. Returns
 * its handle, or FTI_NSCS. */
fti_id_t FTI_InitCompositeType(const char *name, size_t size, FTIT_H5Group *h5g);

/* Field name of type fid at offset bytes into composite type id; it must
 * lie inside the structure, and a name is given once. */
int FTI_AddScalarField(fti_id_t id, const char *name, fti_id_t fid, size_t offset);

/* Field name, an array of ndims (1 to 32) dimensions of dim_sizes elements
 * of type tid, at offset bytes into composite type id. */
int FTI_AddVectorField(fti_id_t id, const char *name, fti_id_t tid, size_t offset, int ndims,
                       int *dim_sizes);

/* Protects count elements of type tid at ptr as variable id, or changes
 * the pointer, count or type of a protected variable. */
int FTI_Protect(int id, void *ptr, int64_t count, fti_id_t tid);

/* Size in bytes of variable id in the checkpoint to recover (0 if none). */
int64_t FTI_GetStoredSize(int id);

/* On a restart, reallocates variable id's malloc'ed buffer to its stored
 * size and protects the new buffer; returns it (NULL on failure). */
void *FTI_Realloc(int id, void *ptr);

/* Writes a checkpoint now, kept at level 1 to 4 (5 to 9: see FTIT_level).
 * frame numbers checkpoints itself: id may be any number. Returns FTI_DONE.
 * Collective. */
int FTI_Checkpoint(int id, int level);

/* Loads every protected variable on this rank: from the checkpoint to
 * recover, or, once the run wrote checkpoints, from the newest of them.
 * FTI_NREC when there is none or a variable does not fit. Not collective:
 * other ranks may recover variable by variable, or not at all. */
int FTI_Recover(void);

/* Once per iteration: recovers on the first call of a restart, then
 * writes a checkpoint when the interval has passed (FTI_DONE). Collective. */
int FTI_Snapshot(void);

/* Waits for promotions in flight, removes the checkpoints (with
 * keep_last_ckpt = 1: all but the newest, kept in the global directory),
 * writes [restart] failure back into the configuration file (0, or 2 when
 * a checkpoint was kept), and releases the dedicated ranks. Collective. */
int FTI_Finalize(void);

/* Recovering variables one by one, from the checkpoint FTI_Recover would
 * load. A variable that failed (protected with another size) can be
 * resized with FTI_Realloc and recovered again; FTI_RecoverVarFinalize
 * leaves the restart pending. Not collective. */
int FTI_RecoverVarInit(void);
int FTI_RecoverVar(int id);
int FTI_RecoverVarFinalize(void);

/* Staging (enable_staging = 1): the node's stage directory, where the
 * program writes files that FTI_SendFile moves to the global file system
 * (copied, synced and renamed there, then removed here; within the call).
 * FTI_SendFile returns the request's id (FTI_NSCS on failure, the file
 * left in place); FTI_GetStageStatus gives FTI_SI_SCES once for it, then
 * FTI_SI_NINI. */
int FTI_GetStageDir(char *stageDir, int maxLen);
int FTI_SendFile(const char *lpath, const char *rpath);
int FTI_GetStageStatus(int ID);

/* Variable ids by name: the id name was given in this session, or the
 * next one (registering the same names in the same order gives the same
 * ids in every run); FTI_getIDFromString returns -1 for a name not given
 * one. */
int FTI_setIDFromString(const char *name);
int FTI_getIDFromString(const char *name);

/* A checkpoint written variable by variable: each variable is saved as it
 * is when added, and every protected variable must be added. */
int FTI_InitICP(int id, int level, bool activate);
int FTI_AddVarICP(int varID);
int FTI_FinalizeICP(void);

/* FTI_GetConfig's answer: the session's settings and state under FTI's
 * member names. Only the members that mean something under frame are
 * declared (FTI's MPI tags, hash tables and function pointers are not), so
 * a program reading another one does not compile. Paths and names are
 * NUL-terminated, cut at FTI_BUFS - 1 bytes. */
typedef struct FTIT_configuration {
    bool stagingEnabled;           /* enable_staging */
    bool dcpPosix;                 /* enable_dcp: level 4 writes changed blocks */
    bool keepL4Ckpt;               /* keep_l4_ckpt */
    bool h5SingleFileEnable;       /* h5_single_file_enable */
    bool h5SingleFileKeep;         /* h5_single_file_keep */
    int dcpBlockSize;              /* bytes of a differential block */
    int saveLastCkpt;              /* keep_last_ckpt */
    int verbosity;                 /* verbosity */
    int blockSize;                 /* block_size (KiB) */
    int transferSize;              /* transfer_size (MiB) */
    int test;                      /* local_test */
    int ioMode;                    /* FTI_IO_POSIX, whatever ckpt_io says */
    char cfgFile[FTI_BUFS];        /* the configuration file */
    char h5SingleFileDir[FTI_BUFS];
    char h5SingleFilePrefix[FTI_BUFS];
    char stageDir[FTI_BUFS];       /* the node's stage directory, or "" */
    char localDir[FTI_BUFS];       /* ckpt_dir */
    char glbalDir[FTI_BUFS];       /* glbl_dir */
} FTIT_configuration;

typedef struct FTIT_topology {
    int nbProc;    /* ranks of the communicator given to FTI_Init */
    int nbNodes;   /* nodes */
    int myRank;    /* this rank in the communicator given to FTI_Init */
    int splitRank; /* this rank in FTI_COMM_WORLD */
    int nodeSize;  /* node_size */
    int nbHeads;   /* dedicated ranks per node (head) */
    int nbApprocs; /* the program's ranks per node */
    int groupSize; /* group_size */
    int nodeID;    /* this rank's node */
    int amIaHead;  /* 0: the program's ranks are the ones that call */
    int nodeRank;  /* this rank's place among its node's ranks */
} FTIT_topology;

typedef struct FTIT_checkpoint {
    char dir[FTI_BUFS]; /* where the level keeps this rank's checkpoints */
    int isInline;       /* 1 when the program waits for the level */
    int ckptIntv;       /* ckpt_lN, minutes */
} FTIT_checkpoint;

typedef struct FTIT_execution {
    char id[FTI_BUFS];     /* the execution id ([restart] exec_id) */
    int reco;              /* [restart] failure while a checkpoint waits to be recovered, else 0 */
    int ckptLvel;          /* level (1 to 4) of this run's last FTI_Checkpoint, 0 if none */
    unsigned int ckptId;   /* its id */
    unsigned int ckptCnt;  /* checkpoints this run committed */
    unsigned int nbVar;    /* protected variables */
    int nbGroup;           /* groups made by FTI_InitGroup */
    int initSCES;          /* 1: initialised */
} FTIT_execution;

typedef struct FTIT_allConfiguration {
    FTIT_configuration configuration;
    FTIT_execution execution;
    FTIT_topology topology;
    FTIT_checkpoint checkpoint[5]; /* levels 1 to 4 at their index */
} FTIT_allConfiguration;

/* The session's settings and state; both arguments are ignored (as in
 * FTI: the session FTI_Init opened answers). Before FTI_Init every member
 * is zero. */
FTIT_allConfiguration FTI_GetConfig(const char *configFile, MPI_Comm globalComm);

#ifdef __cplusplus
}
#endif

#endif /* FRAME_FTI_H */
