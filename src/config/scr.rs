//! SCR's configuration, read as SCR users set it, and turned into frame's
//! configuration plus the settings that belong to libscr's calls (the
//! prefix directory, when a checkpoint is needed, when the job must exit).
//!
//! SCR reads `KEY=VALUE` parameters from four places, the first that sets
//! a key winning: the environment (`SCR_FLUSH=4`), the user's file (named
//! by `SCR_CONF_FILE`, else `.scrconf` in the prefix directory), the
//! program's `SCR_Config("KEY=VALUE")` calls, and a system file. libscr
//! reads the first three; it has no system file. Then the
//! `FRAME_<SECTION>_<KEY>` variables override frame's keys, as for every
//! frame program (`FRAME_TOPOLOGY_RANKS_PER_NODE=2` forms virtual nodes).
//!
//! How SCR's parameters become frame's levels:
//! - `SCR_CACHE_BASE` (`/dev/shm`) is level 1's `storage.local_dir`, and
//!   `SCR_CACHE_SIZE` (1) its `retention.keep_last`;
//! - `SCR_COPY_TYPE` picks the redundancy of every checkpoint: `SINGLE`
//!   level 1 only, `PARTNER` level 2, `XOR` level 3 with the XOR scheme
//!   over sets of `SCR_SET_SIZE` nodes, `RS` level 3 with Reed-Solomon
//!   surviving `SCR_SET_FAILURES` lost nodes per set;
//! - `SCR_FLUSH` (10) sends every N-th checkpoint to level 4, in
//!   `.scr/` below `SCR_PREFIX`, which keeps `SCR_PREFIX_SIZE` of them;
//! - the levels are reached in the background unless `SCR_FLUSH_ASYNC`
//!   is set to 0 (SCR copies and flushes before `SCR_Complete_output`
//!   returns by default; frame does not make the program wait unless
//!   asked).
//!
//! A key set in a file or by `SCR_Config` that SCR does not know, and a
//! value that does not parse, is an error naming the key and where it was
//! set; an unknown `SCR_` variable in the environment is a warning (the
//! environment holds other tools' variables). A known key frame does not
//! implement is a warning when set.
//!
//! ```
//! use frame::config::scr::{ScrConf, Setting};
//!
//! let program = [Setting::program("SCR_COPY_TYPE", "PARTNER")];
//! let env = [("SCR_FLUSH", "2"), ("SCR_PREFIX", "/pfs/run")];
//! let scr = ScrConf::load(&program, env, "/home/me".as_ref()).unwrap();
//! assert_eq!(scr.prefix, std::path::Path::new("/pfs/run"));
//! assert_eq!(scr.config.l2.interval.to_string(), "every 1 calls");
//! assert!(scr.config.l3.interval.is_zero());
//! assert_eq!(scr.config.l4.interval.to_string(), "every 2 calls");
//! ```

use super::{Config, ConfigError, Interval, L3Scheme, Source};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What frame does with one of SCR's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Use {
    /// Read and applied.
    Applied,
    /// Accepted without effect: frame meets its purpose another way.
    NotNeeded,
    /// Not implemented: warned about when set.
    Unsupported(&'static str),
}

/// Every parameter of SCR 3.1's documentation, and what frame does with it.
const KEYS: &[(&str, Use)] = &[
    ("SCR_PREFIX", Use::Applied),
    ("SCR_CACHE_BASE", Use::Applied),
    ("SCR_CACHE_SIZE", Use::Applied),
    ("SCR_CACHE_BYPASS", Use::Applied),
    ("SCR_COPY_TYPE", Use::Applied),
    ("SCR_SET_SIZE", Use::Applied),
    ("SCR_SET_FAILURES", Use::Applied),
    ("SCR_FLUSH", Use::Applied),
    ("SCR_PREFIX_SIZE", Use::Applied),
    ("SCR_CHECKPOINT_INTERVAL", Use::Applied),
    ("SCR_CHECKPOINT_SECONDS", Use::Applied),
    ("SCR_CHECKPOINT_OVERHEAD", Use::Applied),
    ("SCR_HALT_SECONDS", Use::Applied),
    ("SCR_CURRENT", Use::Applied),
    ("SCR_DEBUG", Use::Applied),
    ("SCR_CONF_FILE", Use::Applied),
    ("SCR_CONFIG_FILE", Use::NotNeeded),
    ("SCR_ENABLE", Use::Unsupported("libscr is always enabled")),
    ("SCR_CNTL_BASE", Use::NotNeeded),
    ("SCR_FLUSH_ASYNC", Use::Applied),
    ("SCR_FLUSH_TYPE", Use::NotNeeded),
    ("SCR_FLUSH_WIDTH", Use::NotNeeded),
    ("SCR_FLUSH_ON_RESTART", Use::NotNeeded),
    ("SCR_FLUSH_POSTSTAGE", Use::NotNeeded),
    ("SCR_FETCH", Use::NotNeeded),
    ("SCR_FETCH_WIDTH", Use::NotNeeded),
    ("SCR_FETCH_BYPASS", Use::NotNeeded),
    ("SCR_GLOBAL_RESTART", Use::NotNeeded),
    ("SCR_CRC_ON_COPY", Use::NotNeeded),
    ("SCR_CRC_ON_FLUSH", Use::NotNeeded),
    ("SCR_CRC_ON_DELETE", Use::NotNeeded),
    ("SCR_MPI_BUF_SIZE", Use::NotNeeded),
    ("SCR_FILE_BUF_SIZE", Use::NotNeeded),
    ("SCR_WATCHDOG_TIMEOUT", Use::NotNeeded),
    ("SCR_WATCHDOG_TIMEOUT_PFS", Use::NotNeeded),
    ("SCR_DISTRIBUTE", Use::NotNeeded),
    ("SCR_RUNS", Use::NotNeeded),
    ("SCR_MIN_NODES", Use::NotNeeded),
    ("SCR_EXCLUDE_NODES", Use::NotNeeded),
    ("SCR_LOG_ENABLE", Use::NotNeeded),
    ("SCR_LOG_TXT_ENABLE", Use::NotNeeded),
    ("SCR_LOG_SYSLOG_ENABLE", Use::NotNeeded),
    ("SCR_LOG_SYSLOG_PREFIX", Use::NotNeeded),
    ("SCR_LOG_SYSLOG_LEVEL", Use::NotNeeded),
    ("SCR_LOG_SYSLOG_FACILITY", Use::NotNeeded),
    ("SCR_LOG_DB_ENABLE", Use::NotNeeded),
    ("SCR_LOG_DB_DEBUG", Use::NotNeeded),
    ("SCR_LOG_DB_HOST", Use::NotNeeded),
    ("SCR_LOG_DB_USER", Use::NotNeeded),
    ("SCR_LOG_DB_PASS", Use::NotNeeded),
    ("SCR_LOG_DB_NAME", Use::NotNeeded),
    ("SCR_GROUP", Use::Unsupported("frame's sets are of nodes")),
    (
        "SCR_HOP_DISTANCE",
        Use::Unsupported("a node's partner is the next node"),
    ),
    (
        "SCR_HALT_EXIT",
        Use::Unsupported("the program asks SCR_Should_exit"),
    ),
    (
        "SCR_PREFIX_PURGE",
        Use::Unsupported("the prefix's checkpoints are kept"),
    ),
    (
        "SCR_CACHE_PURGE",
        Use::Unsupported("the cache keeps SCR_CACHE_SIZE checkpoints"),
    ),
];

/// The first keys of SCR's descriptor lines (`CKPT=0 INTERVAL=1 TYPE=XOR`).
const DESCRIPTORS: &[&str] = &["CKPT", "STORE", "CACHE"];

/// One parameter set somewhere: its key, value and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting {
    /// The key, upper case (`SCR_FLUSH`).
    pub key: String,
    /// The value as written.
    pub value: String,
    /// Where it was set.
    pub origin: Source,
}

impl Setting {
    /// A parameter the program set with `SCR_Config`.
    pub fn program(key: &str, value: &str) -> Self {
        Self {
            key: key.to_ascii_uppercase(),
            value: value.to_string(),
            origin: Source::Program,
        }
    }
}

/// SCR's configuration as frame runs it.
#[derive(Clone, Debug)]
pub struct ScrConf {
    /// frame's configuration (levels, storage, job id).
    pub config: Config,
    /// `SCR_PREFIX`, absolute: where output datasets go, and level 4.
    pub prefix: PathBuf,
    /// `SCR_CACHE_BYPASS = 1`: checkpoints are copied to their prefix
    /// paths too (as output).
    pub bypass: bool,
    /// `SCR_FLUSH_ASYNC = 0` set: `SCR_Complete_output` returns once every
    /// level due holds the checkpoint, as SCR's synchronous copies and
    /// flushes do. Unset or 1: the levels are reached in the background.
    pub synchronous: bool,
    /// `SCR_CHECKPOINT_INTERVAL`: a checkpoint every N calls of
    /// `SCR_Need_checkpoint` (0: not by calls).
    pub checkpoint_interval: u64,
    /// `SCR_CHECKPOINT_SECONDS`: a checkpoint when this many seconds passed
    /// since the last one ended (0: not by time).
    pub checkpoint_seconds: u64,
    /// `SCR_CHECKPOINT_OVERHEAD`: a checkpoint when one now would cost less
    /// than this percentage of the time since the last (0: not by cost).
    pub checkpoint_overhead: f64,
    /// `SCR_HALT_SECONDS`: the job should exit when the allocation has
    /// less time left than this (0: never for time).
    pub halt_seconds: u64,
    /// `SCR_CURRENT`: the dataset to restart from.
    pub current: Option<String>,
    /// `SCR_DEBUG`: how much libscr says (0: warnings and errors).
    pub debug: u32,
    /// Every parameter's value and where it came from, for `SCR_Config`'s
    /// queries.
    pub values: BTreeMap<String, Setting>,
    /// The keys set that frame does not implement (or SCR does not know,
    /// in the environment), one sentence each.
    pub warnings: Vec<String>,
}

/// Parses a parameter file's text: one `KEY=VALUE` per line, `#` starting
/// a comment. Descriptor lines (several pairs, led by `CKPT`, `STORE` or
/// `CACHE`) are returned apart, by line number.
pub fn parse_file(text: &str, origin: &Path) -> Result<(Vec<Setting>, Vec<usize>), ConfigError> {
    let mut settings = Vec::new();
    let mut descriptors = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = |message: String| ConfigError::IniSyntax {
            path: origin.to_path_buf(),
            line: n + 1,
            message,
        };
        let Some((key, value)) = line.split_once('=') else {
            return Err(bad(format!("`{line}` is not KEY=VALUE")));
        };
        let key = key.trim().to_ascii_uppercase();
        if DESCRIPTORS.contains(&key.as_str()) {
            descriptors.push(n + 1);
            continue;
        }
        let value = value.trim();
        if key.is_empty()
            || key.contains(char::is_whitespace)
            || value.contains(char::is_whitespace)
        {
            return Err(bad(format!("`{line}` is not KEY=VALUE")));
        }
        settings.push(Setting {
            key,
            value: value.to_string(),
            origin: Source::File(origin.to_path_buf()),
        });
    }
    Ok((settings, descriptors))
}

/// The parameters in force, the first setting of each key winning.
struct Values {
    map: BTreeMap<String, Setting>,
}

impl Values {
    fn get(&self, key: &str) -> Option<&Setting> {
        self.map.get(key)
    }

    fn error(&self, key: &str, message: impl Into<String>) -> ConfigError {
        let origin = self.get(key).map_or(Source::Default, |s| s.origin.clone());
        ConfigError::key(origin, None, key, message)
    }

    fn int(&self, key: &str, default: i64, range: (i64, i64)) -> Result<i64, ConfigError> {
        let Some(s) = self.get(key) else {
            return Ok(default);
        };
        let v: i64 = s
            .value
            .parse()
            .map_err(|_| self.error(key, format!("`{}` is not an integer", s.value)))?;
        if v < range.0 || v > range.1 {
            return Err(self.error(key, format!("{v} is outside {}..={}", range.0, range.1)));
        }
        Ok(v)
    }

    fn path(&self, key: &str, default: &Path, cwd: &Path) -> Result<PathBuf, ConfigError> {
        let Some(s) = self.get(key) else {
            return Ok(default.to_path_buf());
        };
        if s.value.is_empty() {
            return Err(self.error(key, "is empty (name a directory)"));
        }
        Ok(cwd.join(super::types::expand_user(&s.value)))
    }

    /// Where `key` was set (`SCR_Config` is the program).
    fn source(&self, key: &str) -> Source {
        self.get(key).map_or(Source::Default, |s| s.origin.clone())
    }
}

impl ScrConf {
    /// SCR's configuration from the program's `SCR_Config` settings,
    /// the environment `env` (its `SCR_*` and `FRAME_*` variables) and the
    /// user's parameter file, relative paths taken from `cwd`.
    pub fn load<I, K, V>(program: &[Setting], env: I, cwd: &Path) -> Result<Self, ConfigError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let env: Vec<(String, String)> =
            env.into_iter().map(|(k, v)| (k.into(), v.into())).collect();
        let mut warnings = Vec::new();
        let mut layers: Vec<Setting> = env
            .iter()
            .filter(|(k, _)| k.starts_with("SCR_"))
            .map(|(k, v)| Setting {
                key: k.clone(),
                value: v.clone(),
                origin: Source::Env(k.clone()),
            })
            .collect();
        let named = |key: &str| {
            layers
                .iter()
                .chain(program)
                .find(|s| s.key == key)
                .map(|s| s.value.clone())
        };
        let prefix =
            normal_path(&named("SCR_PREFIX").map_or_else(|| cwd.to_path_buf(), |p| cwd.join(p)));
        let file = match named("SCR_CONF_FILE") {
            Some(f) => Some(cwd.join(f)),
            None => Some(prefix.join(".scrconf")).filter(|p| p.is_file()),
        };
        if let Some(file) = file {
            let text = std::fs::read_to_string(&file).map_err(|cause| ConfigError::Read {
                path: file.clone(),
                cause,
            })?;
            let (settings, descriptors) = parse_file(&text, &file)?;
            for line in descriptors {
                warnings.push(format!(
                    "{}, line {line}: descriptor lines are not read; SCR_COPY_TYPE, SCR_FLUSH and SCR_CACHE_BASE set frame's levels",
                    file.display()
                ));
            }
            layers.extend(settings);
        }
        layers.extend(program.iter().cloned());
        let mut map = BTreeMap::new();
        for s in layers {
            map.entry(s.key.clone()).or_insert(s);
        }
        for s in map.values() {
            let known = KEYS.iter().find(|(k, _)| *k == s.key);
            match (known, &s.origin) {
                (None, Source::Env(_)) => warnings.push(format!(
                    "environment variable {} is not a parameter of SCR's; ignored",
                    s.key
                )),
                (None, origin) => {
                    return Err(ConfigError::key(
                        origin.clone(),
                        None,
                        &s.key,
                        "is not a parameter of SCR's (see docs/SCR_CONFORMANCE.md)",
                    ))
                }
                (Some((_, Use::Unsupported(why))), origin) => warnings.push(format!(
                    "{} ({origin}) is not implemented and has no effect: {why}",
                    s.key
                )),
                _ => {}
            }
        }
        let values = Values { map };
        let mut scr = Self::from_values(&values, cwd, prefix)?;
        scr.warnings.splice(0..0, warnings);
        scr.config = scr.config.with_env(env)?;
        Ok(scr)
    }

    fn from_values(v: &Values, cwd: &Path, prefix: PathBuf) -> Result<Self, ConfigError> {
        let mut cfg = Config::default();
        let set = |cfg: &mut Config, frame_key: &str, scr_key: &str| {
            cfg.sources.insert(frame_key.to_string(), v.source(scr_key));
        };
        cfg.storage.local_dir = v.path("SCR_CACHE_BASE", Path::new("/dev/shm"), cwd)?;
        set(&mut cfg, "storage.local_dir", "SCR_CACHE_BASE");
        cfg.storage.global_dir = prefix.join(".scr");
        set(&mut cfg, "storage.global_dir", "SCR_PREFIX");
        cfg.job.id = job_id(&prefix);
        let max_keep = i64::from(super::MAX_KEEP_LAST);
        cfg.retention.keep_last = v.int("SCR_CACHE_SIZE", 1, (1, max_keep))? as u32;
        set(&mut cfg, "retention.keep_last", "SCR_CACHE_SIZE");
        // Checkpoints that SCR_Finalize leaves are the next run's restart.
        cfg.retention.keep_on_finalize = true;
        let set_size = v.int(
            "SCR_SET_SIZE",
            8,
            (2, i64::from(crate::topology::MAX_GROUP)),
        )? as u32;
        let failures = v.int("SCR_SET_FAILURES", 2, (1, i64::from(set_size) - 1))? as u32;
        let every = Interval::Calls(1);
        let copy = v
            .get("SCR_COPY_TYPE")
            .map_or("XOR".to_string(), |s| s.value.to_ascii_uppercase());
        match copy.as_str() {
            "SINGLE" => {}
            "PARTNER" => cfg.l2.interval = every,
            "XOR" | "RS" => {
                cfg.l3.interval = every;
                cfg.l3.group_size = set_size;
                (cfg.l3.scheme, cfg.l3.parity) = match copy.as_str() {
                    "XOR" => (L3Scheme::Xor, 1),
                    _ => (L3Scheme::ReedSolomon, failures),
                };
            }
            other => {
                return Err(v.error(
                    "SCR_COPY_TYPE",
                    format!("`{other}` is not one of SINGLE, PARTNER, XOR, RS"),
                ))
            }
        }
        for key in [
            "l2.interval",
            "l3.interval",
            "l3.scheme",
            "l3.group_size",
            "l3.parity",
        ] {
            set(&mut cfg, key, "SCR_COPY_TYPE");
        }
        let flush = v.int("SCR_FLUSH", 10, (0, i64::MAX))?;
        cfg.l4.interval = Interval::Calls(flush as u64);
        set(&mut cfg, "l4.interval", "SCR_FLUSH");
        if v.get("SCR_PREFIX_SIZE").is_some() {
            // SCR's 0 keeps them all: frame keeps as many as it can.
            let keep = match v.int("SCR_PREFIX_SIZE", 0, (0, max_keep))? {
                0 => max_keep,
                n => n,
            };
            cfg.l4.keep_last = keep as u32;
            set(&mut cfg, "l4.keep_last", "SCR_PREFIX_SIZE");
        }
        let overhead = match v.get("SCR_CHECKPOINT_OVERHEAD") {
            None => 0.0,
            Some(s) => s
                .value
                .parse::<f64>()
                .ok()
                .filter(|p| (0.0..=100.0).contains(p))
                .ok_or_else(|| {
                    v.error(
                        "SCR_CHECKPOINT_OVERHEAD",
                        format!("`{}` is not a percentage from 0 to 100", s.value),
                    )
                })?,
        };
        let bypass = v.int("SCR_CACHE_BYPASS", 0, (0, 1))? == 1;
        let current = v
            .get("SCR_CURRENT")
            .map(|s| s.value.clone())
            .filter(|c| !c.is_empty());
        let synchronous = v.int("SCR_FLUSH_ASYNC", 1, (0, 1))? == 0;
        let scr = Self {
            prefix,
            bypass,
            synchronous,
            checkpoint_interval: v.int("SCR_CHECKPOINT_INTERVAL", 0, (0, i64::MAX))? as u64,
            checkpoint_seconds: v.int("SCR_CHECKPOINT_SECONDS", 0, (0, i64::MAX))? as u64,
            checkpoint_overhead: overhead,
            halt_seconds: v.int("SCR_HALT_SECONDS", 0, (0, i64::MAX))? as u64,
            current,
            debug: v.int("SCR_DEBUG", 0, (0, 1 << 20))? as u32,
            values: v.map.clone(),
            warnings: Vec::new(),
            config: cfg,
        };
        scr.config.validate()?;
        Ok(scr)
    }

    /// The value in force of `key` (upper case), for `SCR_Config("KEY")`.
    pub fn value(&self, key: &str) -> Option<&str> {
        self.values
            .get(&key.to_ascii_uppercase())
            .map(|s| s.value.as_str())
    }
}

/// Whether `key` is one of SCR's parameters (known to libscr).
pub fn is_parameter(key: &str) -> bool {
    let key = key.to_ascii_uppercase();
    KEYS.iter().any(|(k, _)| *k == key)
}

/// `path` without `.` components, each `..` taking away the component
/// before it: a lexical clean-up (nothing is looked up on disk), so that
/// `/run/`, `/run/.` and `/run/x/..` are one prefix.
pub fn normal_path(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The job id of the checkpoints of programs run with `prefix`: programs
/// sharing a node's cache directory keep apart by prefix, and a program
/// run again with the same prefix finds its checkpoints.
pub fn job_id(prefix: &Path) -> String {
    let crc = crc32fast::hash(prefix.as_os_str().as_encoded_bytes());
    format!("scr-{crc:08x}")
}

#[cfg(test)]
mod tests;
