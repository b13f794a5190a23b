//! VeloC's configuration file, read as VeloC users write it, and turned
//! into frame's configuration plus the one setting that belongs to the
//! calls (whether a checkpoint waits for its levels).
//!
//! The file holds `key = value` lines without sections (`#` and `;` start
//! comments); a variable `VELOC_<KEY>` in the environment overrides a key.
//! Then the `FRAME_<SECTION>_<KEY>` variables override frame's keys, as
//! for every frame program.
//!
//! How VeloC's keys become frame's levels:
//! - `scratch` (required) is level 1's `storage.local_dir`, and
//!   `scratch_versions` its `retention.keep_last` (0, VeloC's "all": frame's
//!   default);
//! - `ec_interval` turns on level 3 with the XOR scheme (one lost node per
//!   group, as VeloC's erasure coding): 0 every checkpoint, N a checkpoint
//!   at least N seconds after the last, -1 never;
//! - `persistent` is level 4's `storage.global_dir`, reached as
//!   `persistent_interval` says (as `ec_interval`), keeping `max_versions`;
//! - `mode` (required): `sync` makes each checkpoint wait for its levels,
//!   `async` lets frame's managers reach them in the background.
//!
//! A missing required key, a key VeloC does not know, and a value that
//! does not parse are errors naming the file (or variable) and the key. A
//! known key frame does not implement is a warning when set.
//!
//! ```
//! use frame::config::veloc::VelocFile;
//!
//! let text = "scratch = /tmp/scratch\npersistent = /tmp/pfs\nmode = async\nec_interval = -1\n";
//! let veloc = VelocFile::parse(text, "heat.cfg", std::iter::empty::<(String, String)>()).unwrap();
//! assert!(!veloc.synchronous);
//! assert_eq!(veloc.config.storage.global_dir, std::path::Path::new("/tmp/pfs"));
//! assert!(veloc.config.l3.interval.is_zero());
//! assert_eq!(veloc.config.l4.interval.to_string(), "every 1 calls");
//! ```

use super::{Config, ConfigError, Interval, L3Scheme, Source};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What frame does with one of VeloC's keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Use {
    /// Read and applied.
    Applied,
    /// Accepted without effect: frame meets its purpose another way.
    NotNeeded,
    /// Not implemented: warned about when set.
    Unsupported(&'static str),
}

/// Every key VeloC 1.8 reads.
const KEYS: &[(&str, Use)] = &[
    ("scratch", Use::Applied),
    ("persistent", Use::Applied),
    ("mode", Use::Applied),
    ("ec_interval", Use::Applied),
    ("persistent_interval", Use::Applied),
    ("max_versions", Use::Applied),
    ("scratch_versions", Use::Applied),
    ("chksum", Use::NotNeeded),
    ("log_prefix", Use::NotNeeded),
    ("max_parallelism", Use::NotNeeded),
    ("threaded", Use::NotNeeded),
    ("watchdog_interval", Use::NotNeeded),
    (
        "aggregated",
        Use::Unsupported("each rank's checkpoint is its own file"),
    ),
    (
        "meta",
        Use::Unsupported("each rank's checkpoint is its own file"),
    ),
    (
        "axl_type",
        Use::Unsupported("level 4 is written by frame's managers"),
    ),
    ("daos_pool", Use::Unsupported("level 4 is a directory")),
    ("daos_cont", Use::Unsupported("level 4 is a directory")),
];

/// A VeloC configuration file as frame runs it.
#[derive(Clone, Debug)]
pub struct VelocFile {
    /// frame's configuration (levels, storage).
    pub config: Config,
    /// `mode = sync`: a checkpoint returns once every level due holds it.
    pub synchronous: bool,
    /// The keys set that frame does not implement, one sentence each.
    pub warnings: Vec<String>,
    /// The file read.
    pub path: PathBuf,
}

/// One key's value and where it was set.
struct Value {
    text: String,
    origin: Source,
    line: Option<usize>,
}

/// The keys in force, and the file they were read from.
struct Values {
    map: BTreeMap<String, Value>,
    file: PathBuf,
}

impl Values {
    fn error(&self, key: &str, message: impl Into<String>) -> ConfigError {
        match self.map.get(key) {
            Some(v) => ConfigError::key(v.origin.clone(), v.line, key, message),
            // A key the file lacks: the file is at fault.
            None => ConfigError::key(Source::File(self.file.clone()), None, key, message),
        }
    }

    fn text(&self, key: &str) -> Option<&str> {
        self.map.get(key).map(|v| v.text.as_str())
    }

    fn int(&self, key: &str, default: i64, range: (i64, i64)) -> Result<i64, ConfigError> {
        let Some(raw) = self.text(key) else {
            return Ok(default);
        };
        let v: i64 = raw
            .parse()
            .map_err(|_| self.error(key, format!("`{raw}` is not an integer")))?;
        if v < range.0 || v > range.1 {
            return Err(self.error(key, format!("{v} is outside {}..={}", range.0, range.1)));
        }
        Ok(v)
    }

    fn source(&self, key: &str) -> Source {
        self.map
            .get(key)
            .map_or(Source::Default, |v| v.origin.clone())
    }

    /// An interval key: 0 every checkpoint, N seconds, -1 never.
    fn interval(&self, key: &str) -> Result<Interval, ConfigError> {
        Ok(match self.int(key, 0, (-1, i64::from(u32::MAX)))? {
            -1 => Interval::Calls(0),
            0 => Interval::Calls(1),
            secs => Interval::Every(Duration::from_secs(secs as u64)),
        })
    }
}

impl VelocFile {
    /// Reads the file at `path`, with the `VELOC_*` and `FRAME_*`
    /// overrides of `env`.
    pub fn load<I, K, V>(path: impl AsRef<Path>, env: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|cause| ConfigError::Read {
            path: path.to_path_buf(),
            cause,
        })?;
        Self::parse(&text, path, env)
    }

    /// Parses VeloC's text; `origin` names the file in messages.
    pub fn parse<I, K, V>(text: &str, origin: impl AsRef<Path>, env: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let origin = origin.as_ref().to_path_buf();
        let env: Vec<(String, String)> =
            env.into_iter().map(|(k, v)| (k.into(), v.into())).collect();
        let mut map = BTreeMap::new();
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        for (n, line) in text.lines().enumerate() {
            let line = line.split(['#', ';']).next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(ConfigError::IniSyntax {
                    path: origin.clone(),
                    line: n + 1,
                    message: format!("`{line}` is not key = value"),
                });
            };
            let key = key.trim().to_ascii_lowercase();
            if !KEYS.iter().any(|(k, _)| *k == key) {
                return Err(ConfigError::key(
                    Source::File(origin.clone()),
                    Some(n + 1),
                    &key,
                    "is not a key of VeloC's (see docs/VELOC_CONFORMANCE.md)",
                ));
            }
            map.insert(
                key,
                Value {
                    text: value.trim().to_string(),
                    origin: Source::File(origin.clone()),
                    line: Some(n + 1),
                },
            );
        }
        for (key, _) in KEYS {
            let var = format!("VELOC_{}", key.to_ascii_uppercase());
            if let Some((_, value)) = env.iter().find(|(k, _)| *k == var) {
                map.insert(
                    key.to_string(),
                    Value {
                        text: value.trim().to_string(),
                        origin: Source::Env(var),
                        line: None,
                    },
                );
            }
        }
        // VeloC treats an empty value as unset.
        map.retain(|_, v| !v.text.is_empty());
        let values = Values {
            map,
            file: origin.clone(),
        };
        let mut veloc = Self::from_values(&values, origin)?;
        veloc.config = veloc.config.with_env(env)?;
        Ok(veloc)
    }

    fn from_values(v: &Values, path: PathBuf) -> Result<Self, ConfigError> {
        let mut warnings = Vec::new();
        for (key, value) in &v.map {
            if let Some((_, Use::Unsupported(why))) = KEYS.iter().find(|(k, _)| k == key) {
                warnings.push(format!(
                    "{key} ({}) is not implemented and has no effect: {why}",
                    value.origin
                ));
            }
        }
        let synchronous = match v.text("mode") {
            Some("sync") => true,
            Some("async") => false,
            Some(other) => return Err(v.error("mode", format!("`{other}` is not sync or async"))),
            None => return Err(v.error("mode", "is missing (set mode = sync or mode = async)")),
        };
        let scratch = v
            .text("scratch")
            .ok_or_else(|| v.error("scratch", "is missing (name a node-local directory)"))?;
        let mut cfg = Config::default();
        let set = |cfg: &mut Config, frame_key: &str, key: &str| {
            cfg.sources.insert(frame_key.to_string(), v.source(key));
        };
        cfg.storage.local_dir = super::types::expand_user(scratch);
        set(&mut cfg, "storage.local_dir", "scratch");
        let max_keep = i64::from(super::MAX_KEEP_LAST);
        let versions = v.int("scratch_versions", 0, (0, max_keep))?;
        if versions > 0 {
            cfg.retention.keep_last = versions as u32;
            set(&mut cfg, "retention.keep_last", "scratch_versions");
        }
        // VeloC keeps what the program checkpointed for its next run.
        cfg.retention.keep_on_finalize = true;
        cfg.l3.interval = v.interval("ec_interval")?;
        cfg.l3.scheme = L3Scheme::Xor;
        cfg.l3.parity = 1;
        set(&mut cfg, "l3.interval", "ec_interval");
        if let Some(persistent) = v.text("persistent") {
            cfg.storage.global_dir = super::types::expand_user(persistent);
            set(&mut cfg, "storage.global_dir", "persistent");
            cfg.l4.interval = v.interval("persistent_interval")?;
            set(&mut cfg, "l4.interval", "persistent_interval");
            let versions = v.int("max_versions", 0, (0, max_keep))?;
            if versions > 0 {
                cfg.l4.keep_last = versions as u32;
                set(&mut cfg, "l4.keep_last", "max_versions");
            }
        } else {
            cfg.l4.interval = Interval::Calls(0);
        }
        cfg.validate()?;
        Ok(Self {
            config: cfg,
            synchronous,
            warnings,
            path,
        })
    }
}

#[cfg(test)]
mod tests;
