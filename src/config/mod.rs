//! Configuration: what a job's checkpoints look like and where they go.
//!
//! A [`Config`] is read from a TOML file (see `config/default.toml` for every
//! key), then each key may be overridden from the environment with a variable
//! named `FRAME_<SECTION>_<KEY>` (for example `FRAME_STORAGE_LOCAL_DIR`). Every
//! key has a default. Unknown keys, wrong types and invalid values are rejected
//! with the key's name and where the value came from.
//!
//! ```
//! use frame::config::{Config, Interval};
//!
//! let cfg = Config::from_toml_str("[snapshot]\ninterval = 25\n", "inline").unwrap();
//! assert_eq!(cfg.snapshot.interval, Interval::Calls(25));
//! assert_eq!(cfg.retention.keep_last, 2);
//!
//! let err = Config::from_toml_str("[snapshot]\nintervl = 25\n", "inline").unwrap_err();
//! assert!(err.to_string().contains("snapshot.intervl"));
//! ```

pub mod fti;
mod load;
mod recovery;
pub mod scr;
mod storage;
mod types;
mod ulfm;
pub mod veloc;

pub use load::{ConfigError, Source};
pub use recovery::{RecoveryConfig, RecoveryMode, Strategy};
pub use storage::{NodeData, StorageNeed};
pub use types::{Compression, Interval};
pub use ulfm::{ErrorScope, SpareLayout, UlfmConfig};

use bytesize::ByteSize;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Largest `retention.keep_last` (and level `keep_last`) accepted: the
/// recovery ballot tells apart a window of consecutive checkpoint ids that
/// every retained one must fit in.
pub const MAX_KEEP_LAST: u32 = 32;

/// The smallest level-4 block of a differential write (`l4.block_size`).
pub const MIN_L4_BLOCK: u64 = 512;
/// The largest level-4 block of a differential write.
pub const MAX_L4_BLOCK: u64 = 64 << 20;
/// The most differential level-4 writes from one full one to the next
/// (`l4.full_every`).
pub const MAX_FULL_EVERY: u32 = 64;

/// A job's checkpoint configuration.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// `[job]`: identity of the job.
    pub job: JobConfig,
    /// `[storage]`: where checkpoints live.
    pub storage: StorageConfig,
    /// `[snapshot]`: when and how snapshots are written.
    pub snapshot: SnapshotConfig,
    /// `[retention]`: how many checkpoints are kept.
    pub retention: RetentionConfig,
    /// `[l2]`: partner copies.
    pub l2: PartnerConfig,
    /// `[l3]`: Reed-Solomon groups.
    pub l3: ErasureConfig,
    /// `[l4]`: the global directory.
    pub l4: GlobalConfig,
    /// `[manager]`: the background promoter of each node.
    pub manager: ManagerConfig,
    /// `[recovery]`: how the checkpoint to restore is found.
    pub recovery: RecoveryConfig,
    /// `[metrics]`: where figures of each checkpoint go.
    pub metrics: MetricsConfig,
    /// `[topology]`: how ranks form nodes outside frame's runtime.
    pub topology: TopologyConfig,
    /// `[auto]`: what automatic intervals are chosen from.
    pub auto: AutoConfig,
    /// `[ulfm]`
    pub ulfm: UlfmConfig,
    /// Where each key's value came from (keys absent here have their default).
    #[serde(skip)]
    sources: BTreeMap<String, Source>,
    /// Every key's value when the configuration was loaded: a value that
    /// differs now was set by the program.
    #[serde(skip)]
    loaded: BTreeMap<String, toml::Value>,
}

/// `[job]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JobConfig {
    /// Job id: names the job's checkpoint folders. Jobs with different ids may
    /// share directories without touching each other's checkpoints.
    pub id: String,
}

/// `[storage]`
///
/// In both paths, `{uid}` stands for the user id of the process, so that
/// users sharing a machine (and a configuration file) get directories of
/// their own: the default L1 directory is `/dev/shm/frame-{uid}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageConfig {
    /// Node-local directory (RAM-disk or SSD) for level-1 checkpoints.
    #[serde(deserialize_with = "types::user_path")]
    pub local_dir: PathBuf,
    /// Global (parallel file system) directory for level-4 checkpoints.
    #[serde(deserialize_with = "types::user_path")]
    pub global_dir: PathBuf,
}

/// `[snapshot]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SnapshotConfig {
    /// How often `snapshot()` actually writes a checkpoint.
    pub interval: Interval,
    /// Per-chunk compression.
    pub compression: Compression,
    /// zstd level (used when `compression = "zstd"`).
    pub compression_level: i32,
    /// Chunk size: the unit of CRC checking and compression.
    pub chunk_size: ByteSize,
}

/// `[retention]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetentionConfig {
    /// Number of committed level-1 checkpoints kept (the newest ones; the
    /// one being written comes on top).
    pub keep_last: u32,
    /// Keep the checkpoints when the job finalizes normally (otherwise they
    /// are removed, so the next run of the job starts fresh).
    pub keep_on_finalize: bool,
    /// Which older checkpoints of levels 2 and 3 a commit at another level
    /// retires (docs/STORAGE.md): none (`each`, every level keeps its own
    /// `keep_last`), those of the levels below it (`ordered`), or all of
    /// them (`newest`, the smallest footprint).
    pub levels: LevelRetention,
}

/// What a checkpoint committed at one level does to the older checkpoints
/// other node-local levels keep (`retention.levels`). Level 1 keeps its
/// `retention.keep_last` in every case, and each level its own
/// `keep_last` until a commit elsewhere retires them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LevelRetention {
    /// Each level keeps its newest checkpoints whatever the others commit:
    /// an older level-3 checkpoint still covers the loss of a node and its
    /// partner after a newer one went to level 2 only.
    #[default]
    Each,
    /// A commit at a level retires the older checkpoints of the node-local
    /// levels below it (a level-4 commit those of levels 2 and 3; level 3
    /// those of level 2): a higher level is taken to survive what a lower
    /// one does.
    Ordered,
    /// A commit at any level above 1 retires the older checkpoints of
    /// levels 2 and 3: a node keeps one checkpoint above level 1 besides
    /// those in flight, however the levels alternate.
    Newest,
}

impl LevelRetention {
    /// The node-local levels (2 and 3) whose checkpoints older than one
    /// committed at `level` that commit retires, besides `level`'s own
    /// `keep_last`.
    pub(crate) fn retired_by(self, level: crate::Level) -> Vec<crate::Level> {
        use crate::Level;
        let node_local = [Level::L2, Level::L3];
        match self {
            _ if level == Level::L1 => Vec::new(),
            Self::Each => Vec::new(),
            Self::Ordered => node_local.into_iter().filter(|l| *l < level).collect(),
            Self::Newest => node_local.into_iter().filter(|l| *l != level).collect(),
        }
    }
}

/// `[l2]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PartnerConfig {
    /// How often a checkpoint is copied to each node's partner: every N
    /// checkpoints, or a duration; 0 turns level 2 off.
    pub interval: Interval,
    /// Partner nodes that each keep a whole copy of a node's files (the
    /// next ones holding ranks; see `scheme/partner`).
    pub copies: u32,
    /// Level-2 checkpoints kept on each node (the newest committed ones;
    /// the one being promoted comes on top).
    pub keep_last: u32,
}

/// `[l3]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ErasureConfig {
    /// How often a checkpoint is erasure-coded across node groups: every N
    /// checkpoints, or a duration; 0 turns level 3 off.
    pub interval: Interval,
    /// The erasure code: Reed-Solomon (`parity` lost nodes per group) or
    /// XOR (one).
    pub scheme: L3Scheme,
    /// Nodes per group (at most; see `scheme/reed_solomon`).
    pub group_size: u32,
    /// Nodes of a group that may fail together without losing data (1
    /// with XOR).
    pub parity: u32,
    /// Level-3 checkpoints kept on each node (the newest committed ones;
    /// the one being promoted comes on top).
    pub keep_last: u32,
}

/// `[l4]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GlobalConfig {
    /// How often a checkpoint is flushed to `storage.global_dir`: every N
    /// checkpoints, or a duration; 0 turns level 4 off.
    pub interval: Interval,
    /// Level-4 checkpoints kept (the newest ones).
    pub keep_last: u32,
    /// Store only the blocks that changed since the rank's previous
    /// level-4 checkpoint (by 128-bit content hash), the new ones of a
    /// write in one file.
    pub differential: bool,
    /// Unit of the differential comparison: blocks of this size are hashed
    /// and only those that changed are written.
    pub block_size: ByteSize,
    /// Differential writes from one full one (every block written) to the
    /// next: a rank's newest level-4 checkpoint never depends on more.
    pub full_every: u32,
    /// Unit of full (not differential) level-4 writes: one file per chunk.
    pub chunk_size: ByteSize,
    /// Keep every level-4 checkpoint: those newer ones supersede go to
    /// `l4/archive/` (with the chunks they name) instead of being removed;
    /// recovery never reads them there.
    pub archive: bool,
}

/// The erasure code of level 3 (`l3.scheme`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum L3Scheme {
    /// Reed-Solomon parity: `l3.parity` lost nodes per group.
    #[default]
    #[serde(rename = "reed-solomon")]
    ReedSolomon,
    /// XOR parity: one lost node per group, cheaper to encode and rebuild.
    #[serde(rename = "xor")]
    Xor,
}

/// How a node's manager runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ManagerMode {
    /// The runtime's manager under `frame run`, an inline one otherwise.
    Auto,
    /// A background thread in the lowest rank of each node.
    Inline,
}

/// What a snapshot does when the manager's queue is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WhenFull {
    /// Wait for room (the snapshot blocks).
    Wait,
    /// Promote nothing for this checkpoint.
    Skip,
}

/// `[manager]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ManagerConfig {
    /// Where the manager runs.
    pub mode: ManagerMode,
    /// Checkpoints that may wait for promotion on a node.
    pub queue: u32,
    /// What happens when they are that many.
    pub when_full: WhenFull,
    /// Where managers listen: `local` (a Unix socket in the node's local
    /// directory: every node on one machine) or an IP address (TCP).
    pub address: String,
}

/// `[metrics]`
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// A JSON-lines file that gets one line per checkpoint (the time the
    /// program was blocked) and one per node and level promoted (the time
    /// the manager spent); empty for none. `{uid}` stands for the user id.
    #[serde(deserialize_with = "types::user_path")]
    pub file: PathBuf,
}

/// `[auto]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AutoConfig {
    /// The mean time between the failures that each level is the lowest to
    /// recover from, level 1 first (a process, a node, a node and its
    /// partner, more nodes of a group than its parity): 1 to 4 entries, one
    /// per level; the entries of levels whose interval is not `"auto"` are
    /// not used.
    #[serde(with = "types::durations")]
    pub mtbf: Vec<std::time::Duration>,
}

impl Default for AutoConfig {
    fn default() -> Self {
        let hours = |h: u64| std::time::Duration::from_secs(h * 3600);
        Self {
            mtbf: vec![hours(24), hours(7 * 24), hours(30 * 24), hours(365 * 24)],
        }
    }
}

/// `[topology]`
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TopologyConfig {
    /// 0: a node is the set of ranks that share memory. N: every N
    /// consecutive ranks form a virtual node with its own level-1 directory
    /// (`node-<n>` below `storage.local_dir`), so that node failures can be
    /// tested on one host. Read by communicators that find nodes themselves
    /// (MPI); under `frame run` the runtime places the ranks.
    pub ranks_per_node: u32,
}

impl Default for PartnerConfig {
    fn default() -> Self {
        Self {
            interval: Interval::Calls(0),
            copies: 1,
            keep_last: 1,
        }
    }
}

impl Default for ErasureConfig {
    fn default() -> Self {
        Self {
            interval: Interval::Calls(0),
            scheme: L3Scheme::ReedSolomon,
            group_size: 4,
            parity: 1,
            keep_last: 1,
        }
    }
}

impl Default for GlobalConfig {
    fn default() -> Self {
        Self {
            interval: Interval::Calls(0),
            keep_last: 2,
            differential: true,
            block_size: ByteSize::kib(64),
            full_every: 8,
            chunk_size: ByteSize::mib(16),
            archive: false,
        }
    }
}

impl Default for ManagerConfig {
    fn default() -> Self {
        Self {
            mode: ManagerMode::Auto,
            queue: 1,
            when_full: WhenFull::Wait,
            address: "local".into(),
        }
    }
}

impl Default for JobConfig {
    fn default() -> Self {
        Self { id: "frame".into() }
    }
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            local_dir: types::expand_user("/dev/shm/frame-{uid}"),
            global_dir: PathBuf::from("frame-global"),
        }
    }
}

impl Default for SnapshotConfig {
    fn default() -> Self {
        Self {
            interval: Interval::Every(std::time::Duration::from_secs(60)),
            compression: Compression::None,
            compression_level: 3,
            chunk_size: ByteSize::mib(4),
        }
    }
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self {
            keep_last: 2,
            keep_on_finalize: false,
            levels: LevelRetention::Each,
        }
    }
}

/// Two configurations are equal when every key has the same value (where
/// the values came from does not matter).
impl PartialEq for Config {
    fn eq(&self, other: &Self) -> bool {
        self.job == other.job
            && self.storage == other.storage
            && self.snapshot == other.snapshot
            && self.retention == other.retention
            && self.l2 == other.l2
            && self.l3 == other.l3
            && self.l4 == other.l4
            && self.manager == other.manager
            && self.recovery == other.recovery
            && self.metrics == other.metrics
            && self.topology == other.topology
            && self.auto == other.auto
    }
}

impl Config {
    /// Where the value of `key` (for example `"storage.local_dir"`) came
    /// from. A value the program changed after loading (or in a
    /// `Config::default()`) is reported as set by the program, whether or
    /// not it called [`mark_set_by_program`](Self::mark_set_by_program).
    pub fn source_of(&self, key: &str) -> Source {
        let recorded = self.sources.get(key).cloned().unwrap_or(Source::Default);
        if recorded == Source::Program {
            return recorded;
        }
        let now = self.values().remove(key);
        let then = match self.loaded.get(key) {
            Some(v) => Some(v.clone()),
            None => Config::default().values().remove(key),
        };
        if now.is_some() && now != then {
            Source::Program
        } else {
            recorded
        }
    }

    /// Every key's current value, by dotted key.
    fn values(&self) -> BTreeMap<String, toml::Value> {
        let mut out = BTreeMap::new();
        for (section, value) in toml::Table::try_from(self).unwrap_or_default() {
            if let toml::Value::Table(t) = value {
                for (key, v) in t {
                    out.insert(format!("{section}.{key}"), v);
                }
            }
        }
        out
    }

    /// Remembers the current values as the loaded ones.
    fn mark_loaded(&mut self) {
        self.loaded = self.values();
    }

    /// Records that `key` was set by the program itself (for error messages).
    pub fn mark_set_by_program(&mut self, key: &str) {
        self.sources.insert(key.to_string(), Source::Program);
    }

    /// Describes `key` with its origin, for error messages:
    /// `` `storage.local_dir` (from /etc/job.toml) ``.
    pub fn describe(&self, key: &str) -> String {
        format!("`{key}` ({})", self.source_of(key))
    }

    /// Points `storage.local_dir` and `storage.global_dir` at the
    /// directories frame keeps its files in: a shared directory with the
    /// sticky bit (`/dev/shm`, `/tmp`) becomes this user's private
    /// `frame-<uid>` inside it, created mode 0700 if missing; any other
    /// directory stays as it is. Where each value came from is kept for
    /// messages, and calling this again changes nothing.
    ///
    /// Fails, naming the key and where its value came from, when
    /// `storage.local_dir` is a directory frame must not use (writable by
    /// others without the sticky bit, a link, another user's). An unusable
    /// `storage.global_dir` is left as it is, for level 4 to report where
    /// it is used: a job without level 4 never needs it.
    pub fn private_storage_roots(&mut self) -> Result<(), ConfigError> {
        let key = "storage.local_dir";
        let local = crate::safefs::private_root(&self.storage.local_dir)
            .map_err(|e| ConfigError::key(self.source_of(key), None, key, e.to_string()))?;
        let global = crate::safefs::private_root(&self.storage.global_dir)
            .unwrap_or_else(|_| self.storage.global_dir.clone());
        self.move_storage_root("storage.local_dir", local);
        self.move_storage_root("storage.global_dir", global);
        Ok(())
    }

    /// Sets storage key `key` to `path`, the directory below its value that
    /// frame uses: the value keeps its origin.
    fn move_storage_root(&mut self, key: &str, path: std::path::PathBuf) {
        let current = match key {
            "storage.local_dir" => &self.storage.local_dir,
            _ => &self.storage.global_dir,
        };
        if *current == path {
            return;
        }
        let before = self.source_of(key);
        match key {
            "storage.local_dir" => self.storage.local_dir = path.clone(),
            _ => self.storage.global_dir = path.clone(),
        }
        if before != Source::Program {
            let value = toml::Value::String(path.display().to_string());
            self.loaded.insert(key.to_string(), value);
        }
    }

    /// The interval of `level` (levels 2 to 4; level 1 is `snapshot.interval`).
    pub fn level_interval(&self, level: crate::level::Level) -> Interval {
        use crate::level::Level;
        match level {
            Level::L1 => self.snapshot.interval,
            Level::L2 => self.l2.interval,
            Level::L3 => self.l3.interval,
            Level::L4 => self.l4.interval,
        }
    }

    /// The metrics file, if one is configured.
    pub fn metrics_file(&self) -> Option<&std::path::Path> {
        (!self.metrics.file.as_os_str().is_empty()).then_some(self.metrics.file.as_path())
    }

    /// Chunk size in bytes (validated to fit the file format).
    pub fn chunk_bytes(&self) -> usize {
        usize::try_from(self.snapshot.chunk_size.as_u64()).unwrap_or(usize::MAX)
    }
}
