//! frame-log: how frame's processes print what the library reports (its
//! `tracing` events) on standard error. The core library only emits
//! events; the tool, the runtime, the examples, libframe, libfti and the
//! Python package print them through this crate, so a program that only
//! checkpoints pulls no log subscriber.
//!
//! By default each event is one plain line a user can read, with no
//! timestamp or module path: `frame: warning: level 2 failed: ...`, or
//! under libfti `[ frame-FTI  Warning ] : level 2 failed: ...`. The
//! variable [`env::LOG_FORMAT`](frame::env::LOG_FORMAT) set to `full`
//! asks for `tracing`'s own format instead (timestamps, levels, module
//! paths), for debugging; [`env::LOG`](frame::env::LOG) (`RUST_LOG`)
//! chooses which events are printed, as everywhere in Rust.
//!
//! A program that sets up `tracing` itself keeps its own subscriber:
//! [`init`] then changes nothing.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::fmt;
pub use tracing::Level;
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// What starts each line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Style {
    /// `frame: warning: message key=value` (nothing before an
    /// information, the level's name before anything else).
    Plain,
    /// `[ frame-FTI  Warning ] : message key=value`: the bracketed level
    /// FTI programs' users read and search their logs for.
    Fti,
}

/// The format `FRAME_LOG_FORMAT` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// One plain line per event (the default).
    Plain,
    /// `tracing`'s own format: timestamp, level, module path.
    Full,
}

impl Format {
    /// The format of [`env::LOG_FORMAT`](frame::env::LOG_FORMAT); an
    /// unknown value is said once and the default used.
    fn from_env() -> Self {
        match frame::env::var(frame::env::LOG_FORMAT).as_deref() {
            None | Some("") | Some("plain") => Format::Plain,
            Some("full") => Format::Full,
            Some(other) => {
                eprintln!(
                    "frame: warning: {}={other:?} is not a log format (plain or full); using plain",
                    frame::env::LOG_FORMAT
                );
                Format::Plain
            }
        }
    }
}

/// Prints the events `RUST_LOG` selects (or, without it, those at
/// `default` and above: `"warn"`, `"info"`, ...) on standard error, in
/// `style` unless `FRAME_LOG_FORMAT=full`. Does nothing when the process
/// already has a subscriber.
pub fn init(style: Style, default: &str) {
    let filter =
        EnvFilter::try_from_env(frame::env::LOG).unwrap_or_else(|_| EnvFilter::new(default));
    init_with(style, filter);
}

/// [`init`] with the events chosen by `filter` whatever `RUST_LOG` says
/// (a configuration's verbosity).
pub fn init_with(style: Style, filter: EnvFilter) {
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = match Format::from_env() {
        Format::Plain => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .event_format(Line { style })
            .try_init(),
        Format::Full => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(ansi)
            .try_init(),
    };
}

/// What starts a line of `level` in `style` (for messages a program
/// prints itself, so that they read like the library's).
pub fn prefix(style: Style, level: Level) -> String {
    Line { style }.prefix(level)
}

/// Prints `message` on standard error as a line of `level` in `style`,
/// its further lines indented below the first, in one write so that the
/// lines of processes sharing a terminal never mix (for messages a
/// library interface prints itself: libfti's and libscr's).
pub fn say(style: Style, level: Level, message: impl fmt::Display) {
    let text = message.to_string().replace('\n', "\n    ");
    let line = format!("{}{text}\n", prefix(style, level));
    let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
}

/// One event as one line.
struct Line {
    style: Style,
}

impl Line {
    fn prefix(&self, level: Level) -> String {
        match self.style {
            Style::Plain => match level {
                Level::ERROR => "frame: error: ".into(),
                Level::WARN => "frame: warning: ".into(),
                Level::INFO => "frame: ".into(),
                Level::DEBUG | Level::TRACE => "frame: debug: ".into(),
            },
            Style::Fti => {
                let word = match level {
                    Level::ERROR => "Error",
                    Level::WARN => "Warning",
                    Level::INFO => "Information",
                    Level::DEBUG | Level::TRACE => "Debug",
                };
                format!("[ frame-FTI  {word} ] : ")
            }
        }
    }
}

impl<S, N> FormatEvent<S, N> for Line
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        write!(writer, "{}", self.prefix(*event.metadata().level()))?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests;
