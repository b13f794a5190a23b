//! FTI's INI configuration file, read as FTI users write it, and turned
//! into frame's configuration plus the few settings that belong to the
//! program's layout (dedicated manager ranks, ranks per node).
//!
//! Sections and keys are matched in any case, and a leading UTF-8
//! byte-order mark is skipped. Every key of FTI 1.6's template, and every
//! other key FTI 1.6 reads, is accepted; the ones frame does not implement are reported in
//! [`FtiFile::warnings`] when they are set to something other than FTI's
//! default (at the default they change nothing). Keys FTI does not know are
//! reported too. libfti writes `[restart] failure` and `exec_id` back into
//! the file as FTI does (see `ffi/fti`); this module only reads.
//!
//! One section is frame's own, and FTI ignores it: `[frame] mtbf = 6h, 2d`
//! (one mean time between failures per level, level 1 first) makes every
//! level the file enables (`ckpt_lN` > 0) checkpoint at intervals frame
//! chooses and tunes from those rates and the costs it measures
//! (`snapshot.interval = "auto"`), instead of FTI's fixed minutes.
//!
//! ```
//! use frame::config::fti::FtiFile;
//!
//! let ini = "[Basic]\nHead = 0\nNode_size = 2\nCkpt_dir = /tmp/l1\nGlbl_dir = /tmp/pfs\n\
//!            Ckpt_L1 = 5\nCkpt_L2 = 0\nCkpt_L3 = 15\nCkpt_L4 = 60\nGroup_size = 4\n\
//!            [Advanced]\nLocal_test = 1\n";
//! let fti = FtiFile::parse(ini, "config.fti").unwrap();
//! assert_eq!(fti.node_size, 2);
//! assert!(fti.local_test);
//! assert_eq!(fti.config.topology.ranks_per_node, 2);
//! assert_eq!(fti.config.storage.local_dir, std::path::Path::new("/tmp/l1"));
//! assert_eq!(fti.config.snapshot.interval.to_string(), "every 5m");
//! assert!(fti.config.l2.interval.is_zero());
//! ```

use super::{Config, ConfigError, Interval, Source};
use bytesize::ByteSize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What frame does with a key of FTI's template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Use {
    /// Read and applied.
    Applied,
    /// Accepted without effect: frame meets its purpose another way (its
    /// messages travel on private communicators, its metadata lives with
    /// each level's files, a restart is found from the checkpoints).
    NotNeeded,
    /// Not implemented: warned about when set to anything but this default.
    Unsupported(&'static str),
}

/// Every key of FTI 1.6's template: (section, key, use).
const KEYS: &[(&str, &str, Use)] = &[
    ("basic", "head", Use::Applied),
    ("basic", "node_size", Use::Applied),
    ("basic", "ckpt_dir", Use::Applied),
    ("basic", "glbl_dir", Use::Applied),
    ("basic", "meta_dir", Use::NotNeeded),
    ("basic", "ckpt_l1", Use::Applied),
    ("basic", "ckpt_l2", Use::Applied),
    ("basic", "ckpt_l3", Use::Applied),
    ("basic", "ckpt_l4", Use::Applied),
    ("basic", "dcp_l4", Use::Applied),
    ("basic", "inline_l2", Use::Applied),
    ("basic", "inline_l3", Use::Applied),
    ("basic", "inline_l4", Use::Applied),
    ("basic", "keep_last_ckpt", Use::Applied),
    ("basic", "keep_l4_ckpt", Use::Applied),
    ("basic", "group_size", Use::Applied),
    ("basic", "max_sync_intv", Use::NotNeeded),
    ("basic", "ckpt_io", Use::Unsupported("1")),
    ("basic", "enable_staging", Use::Applied),
    ("basic", "enable_dcp", Use::Applied),
    ("basic", "dcp_mode", Use::NotNeeded),
    ("basic", "dcp_block_size", Use::Applied),
    ("basic", "verbosity", Use::Applied),
    // Keys FTI 1.6 reads that its template leaves out: dCP's layer stack,
    // HDF5 single files, heads kept alive after finalize, the variable id
    // limit (frame has none).
    ("basic", "dcp_stack_size", Use::Applied),
    ("basic", "h5_single_file_enable", Use::Applied),
    ("basic", "h5_single_file_dir", Use::Applied),
    ("basic", "h5_single_file_prefix", Use::Applied),
    ("basic", "h5_single_file_inline", Use::NotNeeded),
    ("basic", "h5_single_file_keep", Use::Applied),
    ("basic", "keep_heads_alive", Use::Unsupported("0")),
    ("basic", "max_var_id", Use::NotNeeded),
    ("basic", "fast_forward", Use::Unsupported("1")),
    ("restart", "failure", Use::Applied),
    ("restart", "exec_id", Use::Applied),
    ("injection", "rank", Use::NotNeeded),
    ("injection", "number", Use::Unsupported("0")),
    ("injection", "position", Use::NotNeeded),
    ("injection", "frequency", Use::NotNeeded),
    ("injection", "index", Use::NotNeeded),
    ("advanced", "block_size", Use::Applied),
    ("advanced", "transfer_size", Use::Applied),
    ("advanced", "mpi_tag", Use::NotNeeded),
    ("advanced", "general_tag", Use::NotNeeded),
    ("advanced", "ckpt_tag", Use::NotNeeded),
    ("advanced", "stage_tag", Use::NotNeeded),
    ("advanced", "final_tag", Use::NotNeeded),
    (
        "advanced",
        "lustre_striping_unit",
        Use::Unsupported("4194304"),
    ),
    ("advanced", "lustre_striping_factor", Use::Unsupported("-1")),
    ("advanced", "lustre_striping_offset", Use::Unsupported("-1")),
    ("advanced", "local_test", Use::Applied),
    ("advanced", "fast_forward", Use::Unsupported("1")),
    ("advanced", "gpu_host_bufsize", Use::NotNeeded),
    // frame's own section, which FTI ignores: see `automatic`.
    ("frame", "mtbf", Use::Applied),
];

/// frame's keys that an FTI file sets.
const APPLIED: &[&str] = &[
    "storage.local_dir",
    "storage.global_dir",
    "snapshot.interval",
    "snapshot.chunk_size",
    "l2.interval",
    "l3.interval",
    "l3.group_size",
    "l3.parity",
    "l4.interval",
    "l4.differential",
    "l4.block_size",
    "l4.full_every",
    "l4.chunk_size",
    "l4.archive",
    "retention.keep_on_finalize",
    "topology.ranks_per_node",
    "auto.mtbf",
];

/// An FTI configuration file, read.
#[derive(Clone, Debug)]
pub struct FtiFile {
    /// frame's configuration with the file's settings (before environment
    /// overrides: see [`FtiFile::load`]).
    pub config: Config,
    /// `head = 1`: the first rank of every node is a dedicated manager,
    /// outside the program's communicator.
    pub head: bool,
    /// Ranks per node, the dedicated one included.
    pub node_size: u32,
    /// `local_test = 1`: every rank runs on one host, and each `node_size`
    /// consecutive ranks form a virtual node.
    pub local_test: bool,
    /// `inline_l2`..`inline_l4`: the program waits for that level's
    /// promotion to finish (FTI's synchronous post-processing).
    pub inline: [bool; 3],
    /// Whether `FTI_Snapshot` writes checkpoints at all (some `ckpt_lN` > 0).
    pub snapshots: bool,
    /// `ckpt_l1`..`ckpt_l4` as written: each level's interval in minutes
    /// (0: never by `FTI_Snapshot`).
    pub minutes: [u32; 4],
    /// `[restart] failure` is 1 or 2: the user expects a restart.
    pub restart: bool,
    /// `[restart] failure` as written: 0 (or 3) a new execution, 1 a
    /// restart after a failure, 2 a restart from the checkpoint the last
    /// run kept (`keep_last_ckpt`).
    pub failure: u8,
    /// `[restart] exec_id`: the execution a restart continues (FTI's
    /// template placeholder counts as none).
    pub exec_id: Option<String>,
    /// `enable_staging = 1`: `FTI_SendFile` moves files the program wrote
    /// in the node's stage directory to the global file system.
    pub staging: bool,
    /// `h5_single_file_enable = 1`: checkpoints at `FTI_L4_H5_SINGLE` also
    /// write the global data sets into one file set, from which a run on
    /// another number of ranks restarts (`[restart] failure = 3`).
    pub single_file: Option<SingleFile>,
    /// `verbosity`: 1 debug, 2 information, 3 errors only, 4 silent.
    pub verbosity: u8,
    /// Keys set but not implemented, and keys FTI does not know, one
    /// message each.
    pub warnings: Vec<String>,
    /// The file read.
    pub path: PathBuf,
}

/// Where and how global data sets are written (`h5_single_file_*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SingleFile {
    /// `h5_single_file_dir` (the global directory by default).
    pub dir: PathBuf,
    /// `h5_single_file_prefix` (`VPR-h5` by default, as in FTI).
    pub prefix: String,
    /// `h5_single_file_keep = 1`: older single files stay when a newer one
    /// is written.
    pub keep: bool,
}

/// The ranks of the file's values, in the order FTI's template lists them.
struct Values {
    origin: PathBuf,
    ini: ini::Ini,
}

impl Values {
    fn error(&self, section: &str, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::key(
            Source::File(self.origin.clone()),
            None,
            &format!("[{section}] {key}"),
            message,
        )
    }

    /// The value of `key` in `section`. As in FTI, a section may appear
    /// more than once and a key may be repeated: the last value counts.
    fn text(&self, section: &str, key: &str) -> Option<&str> {
        self.ini
            .section_all(Some(section))
            .filter_map(|props| props.get_all(key).next_back())
            .next_back()
            .map(str::trim)
    }

    fn int(
        &self,
        section: &str,
        key: &str,
        default: i64,
        range: (i64, i64),
    ) -> Result<i64, ConfigError> {
        let Some(raw) = self.text(section, key) else {
            return Ok(default);
        };
        let v: i64 = raw
            .parse()
            .map_err(|_| self.error(section, key, format!("`{raw}` is not an integer")))?;
        if v < range.0 || v > range.1 {
            return Err(self.error(
                section,
                key,
                format!("{v} is outside {}..={}", range.0, range.1),
            ));
        }
        Ok(v)
    }

    fn flag(&self, section: &str, key: &str, default: bool) -> Result<bool, ConfigError> {
        Ok(self.int(section, key, i64::from(default), (0, 1))? == 1)
    }

    fn path(&self, section: &str, key: &str) -> Result<Option<PathBuf>, ConfigError> {
        match self.text(section, key) {
            None => Ok(None),
            Some("") => Err(self.error(section, key, "must not be empty")),
            Some(p) => Ok(Some(super::types::expand_user(p))),
        }
    }
}

/// `[frame] mtbf`: automatic intervals for every level `every` enables
/// (FTI's `ckpt_l1`..`ckpt_l4`, minutes, 0 = off), with one MTBF per level
/// up to the highest enabled one.
fn automatic(v: &Values, cfg: &mut Config, every: &[i64; 4]) -> Result<(), ConfigError> {
    let Some(raw) = v.text("frame", "mtbf") else {
        return Ok(());
    };
    let mut mtbf = Vec::new();
    for (i, part) in raw.split(',').map(str::trim).enumerate() {
        let d = humantime::parse_duration(part).map_err(|e| {
            v.error(
                "frame",
                "mtbf",
                format!(
                    "entry {} (`{part}`) is not a duration such as 6h or 2d: {e}",
                    i + 1
                ),
            )
        })?;
        if d.is_zero() {
            return Err(v.error(
                "frame",
                "mtbf",
                format!("entry {} (level {}) is zero", i + 1, i + 1),
            ));
        }
        mtbf.push(d);
    }
    let Some(highest) = every.iter().rposition(|m| *m > 0) else {
        return Err(v.error(
            "frame",
            "mtbf",
            "no level is enabled (every ckpt_lN is 0): there is nothing to choose intervals for",
        ));
    };
    if mtbf.len() < highest + 1 || mtbf.len() > 4 {
        return Err(v.error(
            "frame",
            "mtbf",
            format!(
                "has {} entries: ckpt_l{} enables level {}, so give 1 MTBF per level for levels 1 to {} (at most 4)",
                mtbf.len(),
                highest + 1,
                highest + 1,
                highest + 1
            ),
        ));
    }
    cfg.auto.mtbf = mtbf;
    cfg.snapshot.interval = Interval::Auto;
    for (level, on) in [
        &mut cfg.l2.interval,
        &mut cfg.l3.interval,
        &mut cfg.l4.interval,
    ]
    .into_iter()
    .zip(&every[1..])
    {
        if *on > 0 {
            *level = Interval::Auto;
        }
    }
    Ok(())
}

fn minutes(m: i64) -> Interval {
    Interval::Every(Duration::from_secs(m as u64 * 60))
}

impl FtiFile {
    /// Reads FTI's INI file at `path`.
    pub fn read(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|cause| ConfigError::Read {
            path: path.to_path_buf(),
            cause,
        })?;
        Self::parse(&text, path)
    }

    /// Reads FTI's INI file at `path`, then applies the
    /// `FRAME_<SECTION>_<KEY>` overrides of `env` to frame's configuration
    /// (so that, for example, `FRAME_SNAPSHOT_INTERVAL=20` checkpoints every
    /// 20 calls instead of FTI's minutes).
    pub fn load<I, K, V>(path: impl AsRef<Path>, env: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let mut fti = Self::read(path)?;
        fti.config = fti.config.with_env(env)?;
        Ok(fti)
    }

    /// Parses FTI's INI text; `origin` names the file in messages.
    pub fn parse(text: &str, origin: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let origin = origin.as_ref().to_path_buf();
        // Editors on some systems start a UTF-8 file with a byte-order
        // mark; it would otherwise become part of the first section's name.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let opt = ini::ParseOption {
            enabled_quote: false,
            enabled_escape: false,
            ..ini::ParseOption::default()
        };
        let ini = ini::Ini::load_from_str_opt(text, opt).map_err(|e| ConfigError::IniSyntax {
            path: origin.clone(),
            line: e.line,
            message: e.msg.to_string(),
        })?;
        let v = Values { origin, ini };
        let mut warnings = unknown_keys(&v);
        for (section, key, usage) in KEYS {
            if let (Use::Unsupported(default), Some(raw)) = (usage, v.text(section, key)) {
                if raw != *default {
                    warnings.push(format!(
                        "{}: [{section}] {key} = {raw} is not implemented by frame and is ignored",
                        v.origin.display()
                    ));
                }
            }
        }
        Self::from_values(&v, warnings)
    }

    fn from_values(v: &Values, warnings: Vec<String>) -> Result<Self, ConfigError> {
        let mut cfg = Config::default();
        cfg.job.id = "fti".into();
        let head = v.flag("basic", "head", false)?;
        let node_size = v.int("basic", "node_size", 2, (1, 4096))? as u32;
        if head && node_size < 2 {
            return Err(v.error(
                "basic",
                "node_size",
                "with head = 1 a node needs at least 2 ranks (its manager and one for the program)",
            ));
        }
        if let Some(p) = v.path("basic", "ckpt_dir")? {
            cfg.storage.local_dir = p;
        }
        if let Some(p) = v.path("basic", "glbl_dir")? {
            cfg.storage.global_dir = p;
        }
        let mut every = [0i64; 4];
        for (i, e) in every.iter_mut().enumerate() {
            *e = v.int(
                "basic",
                &format!("ckpt_l{}", i + 1),
                [3, 5, 7, 11][i],
                (0, 1 << 30),
            )?;
        }
        let snapshots = every.iter().any(|m| *m > 0);
        let written = every.map(|m| m as u32);
        if let Some(first) = every.iter().copied().filter(|m| *m > 0).min() {
            cfg.snapshot.interval = minutes(if every[0] > 0 { every[0] } else { first });
        }
        cfg.l2.interval = if every[1] > 0 {
            minutes(every[1])
        } else {
            Interval::Calls(0)
        };
        cfg.l3.interval = if every[2] > 0 {
            minutes(every[2])
        } else {
            Interval::Calls(0)
        };
        cfg.l4.differential = v.flag("basic", "enable_dcp", false)?;
        // FTI's dCP checkpoints are level-4 ones at their own interval;
        // every level-4 checkpoint of frame's is differential with dCP on,
        // at the shorter of the two intervals.
        let dcp_every = v.int("basic", "dcp_l4", 0, (0, 1 << 30))?;
        if cfg.l4.differential && dcp_every > 0 && (every[3] == 0 || dcp_every < every[3]) {
            every[3] = dcp_every;
        }
        cfg.l4.interval = if every[3] > 0 {
            minutes(every[3])
        } else {
            Interval::Calls(0)
        };
        // FTI's range; FTI's default (-1) leaves frame's block size.
        if cfg.l4.differential && v.text("basic", "dcp_block_size") != Some("-1") {
            let block = v.int("basic", "dcp_block_size", -1, (512, 65535))?;
            if block > 0 {
                cfg.l4.block_size = ByteSize::b(block as u64);
            }
        }
        cfg.l4.full_every = v.int(
            "basic",
            "dcp_stack_size",
            5,
            (1, i64::from(super::MAX_FULL_EVERY)),
        )? as u32;
        automatic(v, &mut cfg, &every)?;
        let mut inline = [true; 3];
        for (i, sync) in inline.iter_mut().enumerate() {
            *sync = v.flag("basic", &format!("inline_l{}", i + 2), true)?;
        }
        cfg.retention.keep_on_finalize = v.flag("basic", "keep_last_ckpt", false)?;
        cfg.l4.archive = v.flag("basic", "keep_l4_ckpt", false)?;
        // FTI keeps one checkpoint on level 1; so does frame for FTI
        // programs (the previous one still stays until the next has
        // committed). Above level 1, FTI programs keep only the newest
        // committed checkpoint, which holds less node-local storage than
        // FTI itself does (docs/STORAGE.md); `FRAME_RETENTION_LEVELS`
        // chooses otherwise.
        cfg.retention.keep_last = 1;
        cfg.retention.levels = super::LevelRetention::Newest;
        let group = v.int(
            "basic",
            "group_size",
            4,
            (2, i64::from(crate::topology::MAX_GROUP)),
        )?;
        cfg.l3.group_size = group as u32;
        // FTI's groups survive the loss of half their nodes.
        cfg.l3.parity = (group as u32 / 2).max(1);
        let verbosity = v.int("basic", "verbosity", 2, (1, 4))? as u8;
        let failure = v.int("restart", "failure", 0, (0, 3))? as u8;
        // FTI's template ships a placeholder: not an execution.
        let exec_id = v
            .text("restart", "exec_id")
            .filter(|id| !id.is_empty() && !id.starts_with("XXXX") && *id != "NULL")
            .map(str::to_string);
        let block = v.int("advanced", "block_size", 1024, (64, 1 << 20))?;
        cfg.snapshot.chunk_size = ByteSize::kib(block as u64);
        let transfer = v.int("advanced", "transfer_size", 16, (1, 1024))?;
        cfg.l4.chunk_size = ByteSize::mib(transfer as u64);
        let local_test = v.flag("advanced", "local_test", false)?;
        if local_test {
            cfg.topology.ranks_per_node = node_size;
        }
        for key in APPLIED {
            cfg.sources
                .insert(key.to_string(), Source::File(v.origin.clone()));
        }
        let single_file = if v.flag("basic", "h5_single_file_enable", false)? {
            Some(SingleFile {
                // FTI's template leaves it empty: the global directory.
                dir: v
                    .text("basic", "h5_single_file_dir")
                    .filter(|d| !d.is_empty())
                    .map(super::types::expand_user)
                    .unwrap_or_else(|| cfg.storage.global_dir.clone()),
                prefix: v
                    .text("basic", "h5_single_file_prefix")
                    .filter(|p| !p.is_empty())
                    .unwrap_or("VPR-h5")
                    .to_string(),
                keep: v.flag("basic", "h5_single_file_keep", false)?,
            })
        } else {
            None
        };
        cfg.validate()?;
        Ok(Self {
            config: cfg,
            head,
            node_size,
            local_test,
            inline,
            snapshots,
            minutes: written,
            staging: v.flag("basic", "enable_staging", false)?,
            single_file,
            restart: matches!(failure, 1 | 2),
            failure,
            exec_id,
            verbosity,
            warnings,
            path: v.origin.clone(),
        })
    }
}

impl FtiFile {
    /// frame's TOML configuration for the same checkpoints, with the
    /// settings TOML has no key for (dedicated manager ranks, synchronous
    /// levels) as comments. `frame fti-config FILE` prints it.
    pub fn to_toml(&self) -> String {
        let body = toml::to_string_pretty(&self.config).unwrap_or_default();
        let yes = |b: bool| if b { "yes" } else { "no" };
        format!(
            "# frame configuration converted from an FTI file.\n\
             # FTI settings without a TOML key (FTI_Init applies them itself):\n\
             #   dedicated manager rank per node (head): {}\n\
             #   ranks per node (node_size): {}\n\
             #   synchronous L2, L3, L4 (inline_l2..l4): {}, {}, {}\n\
             #   FTI_Snapshot writes checkpoints: {}\n\n{body}",
            yes(self.head),
            self.node_size,
            yes(self.inline[0]),
            yes(self.inline[1]),
            yes(self.inline[2]),
            yes(self.snapshots),
        )
    }
}

/// Sections and keys in the file that FTI's template does not have.
fn unknown_keys(v: &Values) -> Vec<String> {
    let mut out = Vec::new();
    for (section, props) in v.ini.iter() {
        let Some(section) = section else {
            for (key, _) in props.iter() {
                out.push(format!(
                    "{}: `{key}` is outside any section and is ignored",
                    v.origin.display()
                ));
            }
            continue;
        };
        let lower = section.to_ascii_lowercase();
        if !KEYS.iter().any(|(s, ..)| *s == lower) {
            out.push(format!(
                "{}: section [{section}] is not one of FTI's ([basic], [restart], [injection], [advanced]) or frame's ([frame]) and is ignored",
                v.origin.display()
            ));
            continue;
        }
        for (key, _) in props.iter() {
            let k = key.to_ascii_lowercase();
            if !KEYS.iter().any(|(s, name, _)| *s == lower && *name == k) {
                out.push(format!(
                    "{}: [{section}] {key} is not a key of FTI's configuration and is ignored",
                    v.origin.display()
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
