//! Reading a [`Config`] from TOML and the environment, and validating it.

use super::{Compression, Config, Interval, MAX_FULL_EVERY, MAX_L4_BLOCK, MIN_L4_BLOCK};
use crate::env::{config_var as env_var_for, CONFIG as CONFIG_ENV, PREFIX as ENV_PREFIX};
use crate::level::Level;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where a configuration value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// The built-in default.
    Default,
    /// A TOML file.
    File(PathBuf),
    /// An environment variable.
    Env(String),
    /// Set by the program after loading.
    Program,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File(p) => write!(f, "from {}", p.display()),
            Source::Env(v) => write!(f, "from environment variable {v}"),
            Source::Program => f.write_str("set by the program"),
        }
    }
}

/// A configuration that cannot be used, with the file, variable and key at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {}: {cause}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error (part of the message, so not a separate source).
        cause: std::io::Error,
    },
    /// The file is not valid TOML.
    #[error("{}, line {line}: invalid TOML: {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// An FTI configuration file is not valid INI.
    #[error("{}, line {line}: invalid INI: {message}", path.display())]
    IniSyntax {
        /// The file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A key is unknown or its value has the wrong type or is out of range.
    #[error("{location}: key `{key}`: {message}")]
    Key {
        /// Where the value came from.
        origin: Source,
        /// Human-readable location (file and line, or variable name).
        location: String,
        /// The dotted key, e.g. `snapshot.chunk_size`.
        key: String,
        /// What is wrong.
        message: String,
    },
}

impl ConfigError {
    pub(super) fn key(
        source: Source,
        line: Option<usize>,
        key: &str,
        message: impl Into<String>,
    ) -> Self {
        let location = match (&source, line) {
            (Source::File(p), Some(l)) => format!("{}, line {l}", p.display()),
            (Source::File(p), None) => p.display().to_string(),
            (Source::Env(v), _) => format!("environment variable {v}"),
            (Source::Default, _) => "built-in default".to_string(),
            (Source::Program, _) => "value set by the program".to_string(),
        };
        ConfigError::Key {
            origin: source,
            location,
            key: key.to_string(),
            message: message.into(),
        }
    }
}

/// The `FRAME_*` variables of `env`.
fn frame_vars<I, K, V>(env: I) -> BTreeMap<String, String>
where
    I: IntoIterator<Item = (K, V)>,
    K: Into<String>,
    V: Into<String>,
{
    env.into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .filter(|(k, _)| k.starts_with(ENV_PREFIX))
        .collect()
}

/// 1-based line number of byte offset `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text.get(..at).unwrap_or(text).matches('\n').count() + 1
}

/// Key paths (`section.key`) of every configuration key, with default values.
fn known_keys() -> Vec<(String, toml::Value)> {
    let defaults = toml::Table::try_from(Config::default()).unwrap_or_default();
    let mut keys = Vec::new();
    for (section, value) in defaults {
        if let toml::Value::Table(t) = value {
            for (key, v) in t {
                keys.push((format!("{section}.{key}"), v));
            }
        }
    }
    keys
}

/// Turns an environment string into a TOML value of the default's type where
/// that parses, and a string otherwise (validation then names the variable).
fn env_value(raw: &str, default: &toml::Value) -> toml::Value {
    match default {
        toml::Value::Integer(_) => raw.trim().parse().map(toml::Value::Integer).ok(),
        toml::Value::Boolean(_) => raw.trim().parse().map(toml::Value::Boolean).ok(),
        toml::Value::Float(_) => raw.trim().parse().map(toml::Value::Float).ok(),
        _ => None,
    }
    .unwrap_or_else(|| toml::Value::String(raw.to_string()))
}

impl Config {
    /// Parses TOML text; `origin` names the file in error messages. The
    /// environment is not consulted.
    pub fn from_toml_str(text: &str, origin: impl AsRef<Path>) -> Result<Config, ConfigError> {
        parse_text(text, origin.as_ref()).map(|(cfg, _)| cfg)
    }

    /// Reads a TOML file, without environment overrides.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Config, ConfigError> {
        Self::read_file(path.as_ref()).map(|(cfg, _)| cfg)
    }

    /// Reads a TOML file into the validated config and its raw table.
    fn read_file(path: &Path) -> Result<(Config, toml::Table), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|cause| ConfigError::Read {
            path: path.to_path_buf(),
            cause,
        })?;
        parse_text(&text, path)
    }

    /// Loads the configuration the way frame programs do: the file `path` (or
    /// the one named by `FRAME_CONFIG`, or none), then the `FRAME_<SECTION>_<KEY>`
    /// environment overrides, then validation.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        Self::load_with_env(path, crate::env::vars())
    }

    /// Like [`Config::load`], with the environment given explicitly.
    pub fn load_with_env<I, K, V>(path: Option<&Path>, env: I) -> Result<Config, ConfigError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let env = frame_vars(env);
        let path = path
            .map(Path::to_path_buf)
            .or_else(|| env.get(CONFIG_ENV).map(PathBuf::from));
        let (base, table) = match &path {
            Some(p) => Self::read_file(p)?,
            None => (Config::default(), toml::Table::new()),
        };
        base.overridden(table, &env)
    }

    /// This configuration with the `FRAME_<SECTION>_<KEY>` overrides of
    /// `env` applied, then validated (`FRAME_CONFIG` is not consulted).
    pub fn with_env<I, K, V>(self, env: I) -> Result<Config, ConfigError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let table = toml::Table::try_from(&self).unwrap_or_default();
        self.overridden(table, &frame_vars(env))
    }

    /// `self`, read from `table`, with `env`'s overrides applied to the
    /// table, then validated.
    fn overridden(
        self,
        mut table: toml::Table,
        env: &BTreeMap<String, String>,
    ) -> Result<Config, ConfigError> {
        let base = self;
        let mut sources = base.sources.clone();
        let keys = known_keys();
        check_unknown_env(env, &keys)?;
        let mut overridden = false;
        for (key, default) in &keys {
            let var = env_var_for(key);
            let Some(raw) = env.get(&var) else { continue };
            let (section, name) = key.split_once('.').unwrap_or((key, ""));
            let section = table
                .entry(section.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if let toml::Value::Table(t) = section {
                t.insert(name.to_string(), env_value(raw, default));
            }
            sources.insert(key.clone(), Source::Env(var));
            overridden = true;
        }
        let mut cfg = if overridden {
            serde_path_to_error::deserialize::<_, Config>(toml::Value::Table(table)).map_err(
                |e| {
                    let key = e.path().to_string();
                    let source = sources.get(&key).cloned().unwrap_or(Source::Default);
                    ConfigError::key(source, None, &key, e.inner().message())
                },
            )?
        } else {
            base
        };
        cfg.sources = sources;
        cfg.mark_loaded();
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks the automatic intervals against `[auto]`.
    fn validate_auto(&self) -> Result<(), ConfigError> {
        let bad = |key: &str, msg: String| ConfigError::key(self.source_of(key), None, key, msg);
        let mtbf = &self.auto.mtbf;
        if mtbf.is_empty() || mtbf.len() > 4 {
            return Err(bad(
                "auto.mtbf",
                format!("has {} entries: give 1 to 4, level 1 first", mtbf.len()),
            ));
        }
        if let Some(i) = mtbf.iter().position(Duration::is_zero) {
            return Err(bad(
                "auto.mtbf",
                format!("entry {} (level {}) is zero", i + 1, i + 1),
            ));
        }
        let snapshot_auto = self.snapshot.interval == Interval::Auto;
        for level in [Level::L2, Level::L3, Level::L4] {
            if self.level_interval(level) != Interval::Auto {
                continue;
            }
            let key = format!("l{}.interval", level.number());
            if !snapshot_auto {
                return Err(bad(&key, "\"auto\" needs snapshot.interval = \"auto\" too (the levels are chosen together)".into()));
            }
            if mtbf.len() < level.number() as usize {
                return Err(bad(
                    "auto.mtbf",
                    format!(
                        "has no entry for level {} (its interval is \"auto\")",
                        level.number()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Checks every value's range; the error names the key and its origin.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |key: &str, msg: String| ConfigError::key(self.source_of(key), None, key, msg);
        let id = &self.job.id;
        let id_ok = !id.is_empty()
            && id.len() <= crate::format::MAX_JOB_ID
            && !id.starts_with('.')
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !id_ok {
            return Err(bad(
                "job.id",
                format!(
                    "`{id}` must be 1 to {} characters of A-Z a-z 0-9 . _ - and not start with `.`",
                    crate::format::MAX_JOB_ID
                ),
            ));
        }
        if self.storage.local_dir.as_os_str().is_empty() {
            return Err(bad("storage.local_dir", "must not be empty".into()));
        }
        if self.storage.global_dir.as_os_str().is_empty() {
            return Err(bad("storage.global_dir", "must not be empty".into()));
        }
        if self.snapshot.interval.is_zero() {
            return Err(bad("snapshot.interval", "must be greater than zero".into()));
        }
        let levels = zstd::compression_level_range();
        if self.snapshot.compression == Compression::Zstd
            && !levels.contains(&self.snapshot.compression_level)
        {
            return Err(bad(
                "snapshot.compression_level",
                format!(
                    "{} is outside zstd's range {}..={}",
                    self.snapshot.compression_level,
                    levels.start(),
                    levels.end()
                ),
            ));
        }
        let chunk = self.snapshot.chunk_size.as_u64();
        let (lo, hi) = (crate::format::MIN_CHUNK, crate::format::MAX_CHUNK);
        if !(lo..=hi).contains(&chunk) {
            return Err(bad(
                "snapshot.chunk_size",
                format!(
                    "{} is outside {}..={}",
                    self.snapshot.chunk_size,
                    bytesize::ByteSize(lo),
                    bytesize::ByteSize(hi)
                ),
            ));
        }
        let log = self.recovery.log_limit.as_u64();
        let (lo, hi) = super::recovery::LOG_LIMITS;
        if !(lo..=hi).contains(&log) {
            return Err(bad(
                "recovery.log_limit",
                format!(
                    "{} is outside {}..={}",
                    self.recovery.log_limit,
                    bytesize::ByteSize(lo),
                    bytesize::ByteSize(hi)
                ),
            ));
        }
        let spares = self.recovery.spares;
        if !(1..=super::recovery::MAX_SPARES).contains(&spares) {
            return Err(bad(
                "recovery.spares",
                format!("{spares} is outside 1..={}", super::recovery::MAX_SPARES),
            ));
        }
        let governor = &self.recovery.idle_governor;
        if !super::recovery::governor_name_ok(governor) {
            return Err(bad(
                "recovery.idle_governor",
                format!("{governor:?} is not a cpufreq governor's name (lowercase letters, digits, _; at most 32)"),
            ));
        }
        self.validate_auto()?;
        let copies = self.l2.copies;
        if !(1..=crate::topology::MAX_COPIES).contains(&copies) {
            return Err(bad(
                "l2.copies",
                format!("{copies} is outside 1..={}", crate::topology::MAX_COPIES),
            ));
        }
        let group = (self.l3.group_size, self.l3.parity);
        if !(2..=crate::topology::MAX_GROUP).contains(&group.0) {
            return Err(bad(
                "l3.group_size",
                format!("{} is outside 2..={}", group.0, crate::topology::MAX_GROUP),
            ));
        }
        if self.l3.scheme == super::L3Scheme::Xor && group.1 != 1 {
            return Err(bad(
                "l3.parity",
                format!(
                    "{} with l3.scheme = \"xor\", which keeps one parity per group (set 1, or use \"reed-solomon\")",
                    group.1
                ),
            ));
        }
        if !(1..group.0).contains(&group.1) {
            return Err(bad(
                "l3.parity",
                format!(
                    "{} must be at least 1 and below l3.group_size ({})",
                    group.1, group.0
                ),
            ));
        }
        for (key, keep) in [
            ("l2.keep_last", self.l2.keep_last),
            ("l3.keep_last", self.l3.keep_last),
            ("l4.keep_last", self.l4.keep_last),
        ] {
            if !(1..=super::MAX_KEEP_LAST).contains(&keep) {
                return Err(bad(
                    key,
                    format!("{keep} is outside 1..={}", super::MAX_KEEP_LAST),
                ));
            }
        }
        let l4_chunk = self.l4.chunk_size.as_u64();
        if !(crate::format::MIN_CHUNK..=crate::format::MAX_CHUNK).contains(&l4_chunk) {
            return Err(bad(
                "l4.chunk_size",
                format!(
                    "{} is outside {}..={}",
                    self.l4.chunk_size,
                    bytesize::ByteSize(crate::format::MIN_CHUNK),
                    bytesize::ByteSize(crate::format::MAX_CHUNK)
                ),
            ));
        }
        let block = self.l4.block_size.as_u64();
        if !(MIN_L4_BLOCK..=MAX_L4_BLOCK).contains(&block) {
            return Err(bad(
                "l4.block_size",
                format!(
                    "{} is outside {}..={}",
                    self.l4.block_size,
                    bytesize::ByteSize(MIN_L4_BLOCK),
                    bytesize::ByteSize(MAX_L4_BLOCK)
                ),
            ));
        }
        if !(1..=MAX_FULL_EVERY).contains(&self.l4.full_every) {
            return Err(bad(
                "l4.full_every",
                format!("{} is outside 1..={MAX_FULL_EVERY}", self.l4.full_every),
            ));
        }
        if !(1..=super::ulfm::MAX_FAILURES).contains(&self.ulfm.max_failures) {
            return Err(bad(
                "ulfm.max_failures",
                format!(
                    "{} is outside 1..={}",
                    self.ulfm.max_failures,
                    super::ulfm::MAX_FAILURES
                ),
            ));
        }
        if !(1..=1024).contains(&self.manager.queue) {
            return Err(bad(
                "manager.queue",
                format!("{} is outside 1..=1024", self.manager.queue),
            ));
        }
        let address = &self.manager.address;
        if address != "local" && address.parse::<std::net::IpAddr>().is_err() {
            return Err(bad(
                "manager.address",
                format!("`{address}` is neither `local` nor an IP address"),
            ));
        }
        if !(1..=super::MAX_KEEP_LAST).contains(&self.retention.keep_last) {
            return Err(bad(
                "retention.keep_last",
                format!(
                    "{} is outside 1..={}",
                    self.retention.keep_last,
                    super::MAX_KEEP_LAST
                ),
            ));
        }
        Ok(())
    }
}

/// Parses and validates TOML text from `path`; also returns the raw table.
fn parse_text(text: &str, path: &Path) -> Result<(Config, toml::Table), ConfigError> {
    let table = parse_table(text, path)?;
    let mut cfg: Config =
        serde_path_to_error::deserialize(toml::Deserializer::new(text)).map_err(|e| {
            let line = e.inner().span().map(|s| line_of(text, s.start));
            ConfigError::key(
                Source::File(path.to_path_buf()),
                line,
                &e.path().to_string(),
                e.inner().message(),
            )
        })?;
    cfg.sources = file_sources(&table, path);
    cfg.mark_loaded();
    cfg.validate()?;
    Ok((cfg, table))
}

/// Parses `text` as a TOML table, reporting syntax errors with file and line.
fn parse_table(text: &str, path: &Path) -> Result<toml::Table, ConfigError> {
    text.parse::<toml::Table>()
        .map_err(|e| ConfigError::Syntax {
            path: path.to_path_buf(),
            line: e.span().map(|s| line_of(text, s.start)).unwrap_or(1),
            message: e.message().to_string(),
        })
}

/// Records every key present in a file's table as coming from that file.
fn file_sources(table: &toml::Table, path: &Path) -> BTreeMap<String, Source> {
    let mut sources = BTreeMap::new();
    for (section, value) in table {
        if let toml::Value::Table(t) = value {
            for key in t.keys() {
                sources.insert(format!("{section}.{key}"), Source::File(path.to_path_buf()));
            }
        }
    }
    sources
}

/// Rejects `FRAME_<SECTION>_...` variables that match no key: a misspelt
/// override must not be silently ignored.
fn check_unknown_env(
    env: &BTreeMap<String, String>,
    keys: &[(String, toml::Value)],
) -> Result<(), ConfigError> {
    let sections: Vec<String> = keys
        .iter()
        .filter_map(|(k, _)| k.split_once('.').map(|(s, _)| env_var_for(s) + "_"))
        .collect();
    for var in env.keys() {
        let in_section = sections.iter().any(|s| var.starts_with(s.as_str()));
        if in_section && !keys.iter().any(|(k, _)| env_var_for(k) == *var) {
            let known: Vec<String> = keys.iter().map(|(k, _)| env_var_for(k)).collect();
            return Err(ConfigError::key(
                Source::Env(var.clone()),
                None,
                &var.trim_start_matches(ENV_PREFIX).to_lowercase(),
                format!(
                    "no such configuration key; known variables: {}",
                    known.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
