//! FTI's restart keys, `[restart] failure` and `exec_id`: which execution a
//! run belongs to, and the values libfti writes back into the program's
//! configuration file where FTI writes them (at `FTI_Init`, after the first
//! checkpoint, at `FTI_Finalize`), so that a job script run again as it was
//! restarts, and `failure = 0` starts a new execution that leaves the
//! older one's checkpoints alone.
//!
//! The file is edited, not rewritten from scratch: every other line, the
//! comments and the spelling of the keys stay as the user wrote them.

use std::io::Write;
use std::path::Path;

/// A new execution id, as FTI spells it: the time (UTC),
/// `YYYY-MM-DD_HH-MM-SS`.
pub(crate) fn new_exec_id() -> String {
    // "2026-11-26T09:32:05Z"
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    stamp
        .trim_end_matches('Z')
        .replace('T', "_")
        .replacen(':', "-", 2)
}

/// `text` (an execution id, a program's name) as part of a job id: the
/// characters job ids allow, at most 64 of them.
pub(crate) fn job_part(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

/// The key of an INI line (`key = value`), lowercased, if it is one.
fn key_of(line: &str) -> Option<String> {
    let t = line.trim_start();
    if t.starts_with([';', '#', '[']) {
        return None;
    }
    let (key, _) = t.split_once('=')?;
    Some(key.trim().to_ascii_lowercase())
}

/// The name of an INI section header line, lowercased, if it is one.
fn section_of(line: &str) -> Option<String> {
    let t = line.trim_start_matches('\u{feff}').trim();
    let name = t.strip_prefix('[')?.split_once(']')?.0;
    Some(name.trim().to_ascii_lowercase())
}

/// `line` with its value replaced by `value`, keeping its indentation, the
/// key as spelt, an inline comment and the line ending.
fn with_value(line: &str, value: &str) -> String {
    let body = line.trim_end_matches(['\r', '\n']);
    let ending = &line[body.len()..];
    let (key, rest) = body.split_once('=').unwrap_or((body, ""));
    let comment = rest
        .find([';', '#'])
        .filter(|i| *i > 0 && rest[..*i].ends_with([' ', '\t']))
        .map_or("", |i| &rest[i..]);
    let key = key.trim_end();
    if comment.is_empty() {
        format!("{key} = {value}{ending}")
    } else {
        format!("{key} = {value} {comment}{ending}")
    }
}

/// `text`, an FTI configuration, with `[restart] failure` and `exec_id`
/// set. Every occurrence in a `[restart]` section is replaced; a key that
/// has none is added under the first `[restart]` header, and a file
/// without one gets the section at its end.
pub(crate) fn with_keys(text: &str, failure: u8, exec_id: &str) -> String {
    let wanted = [
        ("failure", failure.to_string()),
        ("exec_id", exec_id.to_string()),
    ];
    let mut out = String::with_capacity(text.len() + 64);
    let mut found = [false; 2];
    let mut section = String::new();
    let mut header_end: Option<usize> = None;
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
    for line in text.split_inclusive('\n') {
        if let Some(name) = section_of(line) {
            section = name;
            out.push_str(line);
            if section == "restart" && header_end.is_none() {
                if !line.ends_with('\n') {
                    out.push_str(newline);
                }
                header_end = Some(out.len());
            }
            continue;
        }
        let key = key_of(line).filter(|_| section == "restart");
        match wanted.iter().position(|(k, _)| Some(*k) == key.as_deref()) {
            Some(i) => {
                found[i] = true;
                out.push_str(&with_value(line, &wanted[i].1));
            }
            None => out.push_str(line),
        }
    }
    let missing: String = wanted
        .iter()
        .zip(found)
        .filter(|(_, f)| !f)
        .map(|((k, v), _)| format!("{k} = {v}{newline}"))
        .collect();
    match header_end {
        Some(at) => out.insert_str(at, &missing),
        None if !missing.is_empty() => {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push_str(newline);
            }
            out.push_str(&format!("[restart]{newline}{missing}"));
        }
        None => {}
    }
    out
}

/// Sets `[restart] failure` and `exec_id` in the file at `path`: the new
/// text goes to a new file beside it (created exclusively, so never through
/// a link someone else put there, with the file's permissions), which is
/// synced and renamed over it, so a reader sees the
/// old file or the new one. A link is followed: the user named the file.
pub(crate) fn write_keys(path: &Path, failure: u8, exec_id: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let target = std::fs::canonicalize(path)?;
    let text = std::fs::read_to_string(&target)?;
    let new = with_keys(&text, failure, exec_id);
    if new == text {
        return Ok(());
    }
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&target)?.permissions());
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = target.with_file_name(format!(".{name}.frame-{}", std::process::id()));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode & 0o777)
            .open(&tmp)?;
        f.write_all(new.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &target)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests;
