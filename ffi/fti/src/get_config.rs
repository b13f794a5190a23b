//! `FTI_GetConfig`: the configuration and state of the session, as the
//! structure `FTIT_allConfiguration` of `fti.h`.
//!
//! FTI answers with copies of its internal structures. libfti's structures
//! carry the members of FTI's that mean something under frame, under FTI's
//! names and types, filled from the session: the file's settings, the
//! topology, each level's directory and interval, and the execution's
//! counters. Members of FTI's internals that have no meaning here (its MPI
//! tags, hash tables, function pointers) are not declared, so a program
//! that reads one fails to compile rather than read a made-up value.

use crate::session::{self, Session};
use crate::status::{guard_value, Failure};
use mpi::ffi::MPI_Comm;
use std::os::raw::{c_char, c_int, c_uint};
use std::path::Path;

/// FTI's length of a name or path in its structures.
const FTI_BUFS: usize = 256;

/// `FTI_IO_POSIX`: frame writes files with POSIX calls whatever `ckpt_io`
/// asks.
const FTI_IO_POSIX: c_int = 1001;

/// `FTIT_configuration`: the file's settings.
#[repr(C)]
#[allow(non_snake_case)]
pub struct FTIT_configuration {
    /// `enable_staging`.
    pub stagingEnabled: bool,
    /// `enable_dcp`: level 4 writes only changed blocks.
    pub dcpPosix: bool,
    /// `keep_l4_ckpt`.
    pub keepL4Ckpt: bool,
    /// `h5_single_file_enable`.
    pub h5SingleFileEnable: bool,
    /// `h5_single_file_keep`.
    pub h5SingleFileKeep: bool,
    /// The bytes of a differential block.
    pub dcpBlockSize: c_int,
    /// `keep_last_ckpt`.
    pub saveLastCkpt: c_int,
    /// `verbosity`.
    pub verbosity: c_int,
    /// `block_size`, in KiB: a level-1 chunk.
    pub blockSize: c_int,
    /// `transfer_size`, in MiB: a level-4 chunk.
    pub transferSize: c_int,
    /// `local_test`.
    pub test: c_int,
    /// Always `FTI_IO_POSIX`.
    pub ioMode: c_int,
    /// The configuration file.
    pub cfgFile: [c_char; FTI_BUFS],
    /// `h5_single_file_dir`.
    pub h5SingleFileDir: [c_char; FTI_BUFS],
    /// `h5_single_file_prefix`.
    pub h5SingleFilePrefix: [c_char; FTI_BUFS],
    /// The node's stage directory (empty with staging off).
    pub stageDir: [c_char; FTI_BUFS],
    /// `ckpt_dir`.
    pub localDir: [c_char; FTI_BUFS],
    /// `glbl_dir`.
    pub glbalDir: [c_char; FTI_BUFS],
}

/// `FTIT_topology`: the ranks and nodes.
#[repr(C)]
#[allow(non_snake_case)]
pub struct FTIT_topology {
    /// Ranks in the communicator given to `FTI_Init`.
    pub nbProc: c_int,
    /// Nodes.
    pub nbNodes: c_int,
    /// This rank in the communicator given to `FTI_Init`.
    pub myRank: c_int,
    /// This rank in `FTI_COMM_WORLD`.
    pub splitRank: c_int,
    /// `node_size`.
    pub nodeSize: c_int,
    /// Dedicated ranks per node (`head`).
    pub nbHeads: c_int,
    /// The program's ranks per node.
    pub nbApprocs: c_int,
    /// `group_size`.
    pub groupSize: c_int,
    /// This rank's node.
    pub nodeID: c_int,
    /// 0: the program's ranks are the ones that call.
    pub amIaHead: c_int,
    /// This rank's place among its node's ranks.
    pub nodeRank: c_int,
}

/// `FTIT_checkpoint`: one level.
#[repr(C)]
#[allow(non_snake_case)]
pub struct FTIT_checkpoint {
    /// Where the level keeps this rank's checkpoints.
    pub dir: [c_char; FTI_BUFS],
    /// 1 when the program waits for the level (`inline_lN`).
    pub isInline: c_int,
    /// `ckpt_lN`, in minutes.
    pub ckptIntv: c_int,
}

/// `FTIT_execution`: the run so far.
#[repr(C)]
#[allow(non_snake_case)]
pub struct FTIT_execution {
    /// The execution id (`[restart] exec_id`).
    pub id: [c_char; FTI_BUFS],
    /// `[restart] failure` while a checkpoint waits to be recovered, else 0.
    pub reco: c_int,
    /// The level of this run's last `FTI_Checkpoint` (0: none).
    pub ckptLvel: c_int,
    /// The id of this run's last `FTI_Checkpoint`.
    pub ckptId: c_uint,
    /// Checkpoints this run committed.
    pub ckptCnt: c_uint,
    /// Protected variables.
    pub nbVar: c_uint,
    /// Groups made by `FTI_InitGroup`.
    pub nbGroup: c_int,
    /// 1: initialised.
    pub initSCES: c_int,
}

/// `FTIT_allConfiguration`.
#[repr(C)]
pub struct FTIT_allConfiguration {
    /// The file's settings.
    pub configuration: FTIT_configuration,
    /// The run so far.
    pub execution: FTIT_execution,
    /// The ranks and nodes.
    pub topology: FTIT_topology,
    /// Levels 1 to 4 at their index (0 unused, as in FTI).
    pub checkpoint: [FTIT_checkpoint; 5],
}

/// `path` as a NUL-terminated C string of at most `FTI_BUFS` bytes (cut
/// short if longer, as FTI's buffers are).
fn text(path: impl AsRef<std::ffi::OsStr>) -> [c_char; FTI_BUFS] {
    let mut out = [0 as c_char; FTI_BUFS];
    for (o, b) in out
        .iter_mut()
        .zip(path.as_ref().as_encoded_bytes().iter().take(FTI_BUFS - 1))
    {
        *o = *b as c_char;
    }
    out
}

fn clamp(n: impl TryInto<c_int>) -> c_int {
    n.try_into().unwrap_or(c_int::MAX)
}

fn answer(s: &Session) -> FTIT_allConfiguration {
    let (fti, cfg, seat) = (&s.fti, s.ckpt.config(), s.seat);
    let heads = c_int::from(fti.head);
    let node_size = clamp(fti.node_size);
    let single = fti.single_file.as_ref();
    let configuration = FTIT_configuration {
        stagingEnabled: fti.staging,
        dcpPosix: cfg.l4.differential,
        keepL4Ckpt: cfg.l4.archive,
        h5SingleFileEnable: single.is_some(),
        h5SingleFileKeep: single.is_some_and(|f| f.keep),
        dcpBlockSize: clamp(cfg.l4.block_size.as_u64()),
        saveLastCkpt: c_int::from(cfg.retention.keep_on_finalize),
        verbosity: c_int::from(fti.verbosity),
        blockSize: clamp(cfg.snapshot.chunk_size.as_u64() >> 10),
        transferSize: clamp(cfg.l4.chunk_size.as_u64() >> 20),
        test: c_int::from(fti.local_test),
        ioMode: FTI_IO_POSIX,
        cfgFile: text(&fti.path),
        h5SingleFileDir: text(single.map(|f| f.dir.as_os_str()).unwrap_or_default()),
        h5SingleFilePrefix: text(single.map(|f| f.prefix.as_str()).unwrap_or_default()),
        stageDir: text(s.staging.dir.as_deref().unwrap_or(Path::new(""))),
        // As the file says them (the checkpointer's are the node's and the
        // execution's places below them).
        localDir: text(&fti.config.storage.local_dir),
        glbalDir: text(&fti.config.storage.global_dir),
    };
    let topology = FTIT_topology {
        nbProc: seat.world_size,
        nbNodes: seat.world_size / node_size.max(1),
        myRank: seat.world_rank,
        splitRank: clamp(frame_core::comm::Comm::rank(s.comm)),
        nodeSize: node_size,
        nbHeads: heads,
        nbApprocs: node_size - heads,
        groupSize: clamp(cfg.l3.group_size),
        nodeID: seat.node,
        amIaHead: 0,
        nodeRank: seat.node_rank,
    };
    let level = |l: usize| FTIT_checkpoint {
        dir: text(if l == 4 {
            cfg.storage.global_dir.as_path()
        } else {
            s.ckpt.local_dir()
        }),
        isInline: c_int::from(l == 1 || fti.inline[l - 2]),
        ckptIntv: clamp(fti.minutes[l - 1]),
    };
    let execution = FTIT_execution {
        id: text(&s.keys.exec_id),
        reco: if s.recovering {
            c_int::from(fti.failure.max(1))
        } else {
            0
        },
        ckptLvel: s.last_checkpoint.map_or(0, |(_, level)| level),
        ckptId: s.last_checkpoint.map_or(0, |(id, _)| id as c_uint),
        ckptCnt: clamp(s.ckpt.stats().checkpoints) as c_uint,
        nbVar: clamp(s.vars.len()) as c_uint,
        nbGroup: s.datasets.groups,
        initSCES: 1,
    };
    FTIT_allConfiguration {
        configuration,
        execution,
        topology,
        checkpoint: [
            FTIT_checkpoint {
                dir: [0; FTI_BUFS],
                isInline: 0,
                ckptIntv: 0,
            },
            level(1),
            level(2),
            level(3),
            level(4),
        ],
    }
}

/// The session's configuration and state. Both arguments are ignored, as
/// in FTI: the answer is the session's that `FTI_Init` opened. Without a
/// session every member is zero (and the message says why).
///
/// # Safety
/// `_config_file` is not read.
#[no_mangle]
pub unsafe extern "C" fn FTI_GetConfig(
    _config_file: *const c_char,
    _global_comm: MPI_Comm,
) -> FTIT_allConfiguration {
    guard_value(
        "FTI_GetConfig",
        |_| {
            // SAFETY: every member is an integer, a bool or a byte array,
            // for which all zero bits are a value.
            unsafe { std::mem::zeroed() }
        },
        || session::with(|s| Ok::<_, Failure>(answer(s))),
    )
}
