//! The paths programs route: a file name as the program gives it
//! (relative to its working directory, or absolute) made into a path
//! relative to the prefix directory, where SCR requires it to lie.

use frame_core::config::scr::normal_path as clean;
use std::path::Path;

/// The path of file `name` relative to `prefix`, `name` taken relative to
/// `cwd` unless absolute. An error says why it cannot be a dataset's file.
pub(crate) fn below_prefix(name: &str, cwd: &Path, prefix: &Path) -> Result<String, String> {
    if name.is_empty() {
        return Err("the file name is empty".into());
    }
    let full = clean(&cwd.join(name));
    let relative = full
        .strip_prefix(clean(prefix))
        .map_err(|_| {
            format!(
                "{name:?} is not below the prefix directory {} (SCR_PREFIX)",
                prefix.display()
            )
        })?
        .to_path_buf();
    if relative.as_os_str().is_empty() {
        return Err(format!(
            "{name:?} is the prefix directory itself, not a file"
        ));
    }
    relative
        .to_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{name:?} is not UTF-8"))
}

#[cfg(test)]
mod tests;
