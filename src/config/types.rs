//! Value types of configuration keys that have more than one spelling.

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};

pub use crate::format::Compression;
use std::fmt;
use std::time::Duration;

/// How often `snapshot()` writes a checkpoint.
///
/// In TOML an integer means "every N calls" and a string with a unit means
/// "every so much time" (`"90s"`, `"5min"`, `"1h 30min"`). A string holding a
/// plain integer also means calls, so environment overrides can use either.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interval {
    /// Every N calls of `snapshot()`.
    Calls(u64),
    /// Whenever at least this much time passed since the last checkpoint
    /// (decided collectively, so all ranks checkpoint at the same call).
    Every(Duration),
    /// Chosen by frame from the failure rates in `[auto]` and the
    /// checkpoint costs it measures (see `checkpoint::tuning`).
    Auto,
}

impl Interval {
    /// Parses the string spelling (`"10"`, `"30s"`, `"2min"`, `"auto"`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text == "auto" {
            return Ok(Interval::Auto);
        }
        if let Ok(n) = text.parse::<u64>() {
            return Ok(Interval::Calls(n));
        }
        humantime::parse_duration(text)
            .map(Interval::Every)
            .map_err(|e| format!("`{text}` is neither a number of calls nor a duration ({e})"))
    }

    /// Whether the interval is zero (which is rejected by validation).
    pub fn is_zero(&self) -> bool {
        match self {
            Interval::Calls(n) => *n == 0,
            Interval::Every(d) => d.is_zero(),
            Interval::Auto => false,
        }
    }
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Interval::Calls(n) => write!(f, "every {n} calls"),
            Interval::Every(d) => write!(f, "every {}", humantime::format_duration(*d)),
            Interval::Auto => f.write_str("auto"),
        }
    }
}

impl Serialize for Interval {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Interval::Calls(n) => s.serialize_u64(*n),
            Interval::Every(d) => s.serialize_str(&humantime::format_duration(*d).to_string()),
            Interval::Auto => s.serialize_str("auto"),
        }
    }
}

impl<'de> Deserialize<'de> for Interval {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Interval;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number of calls (integer), a duration such as \"30s\", or \"auto\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Interval, E> {
                Ok(Interval::Calls(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Interval, E> {
                u64::try_from(v)
                    .map(Interval::Calls)
                    .map_err(|_| E::custom(format!("{v} is negative")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Interval, E> {
                Interval::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// `text` with `{uid}` replaced by this process's user id.
pub(crate) fn expand_user(text: &str) -> std::path::PathBuf {
    text.replace("{uid}", &crate::safefs::my_uid().to_string())
        .into()
}

/// Deserializes a path, expanding `{uid}`.
pub(crate) fn user_path<'de, D: Deserializer<'de>>(d: D) -> Result<std::path::PathBuf, D::Error> {
    let text = String::deserialize(d)?;
    Ok(expand_user(&text))
}

/// A list of durations written as strings (`["12h", "3d"]`).
pub(crate) mod durations {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::time::Duration;

    pub(crate) fn serialize<S: Serializer>(v: &[Duration], s: S) -> Result<S::Ok, S::Error> {
        v.iter()
            .map(|d| humantime::format_duration(*d).to_string())
            .collect::<Vec<_>>()
            .serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Duration>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|t| {
                humantime::parse_duration(t.trim())
                    .map_err(|e| serde::de::Error::custom(format!("`{t}` is not a duration ({e})")))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
