//! The library's layering, as docs/ARCHITECTURE.md draws it: no two files
//! of a crate (the core library, the runtime, the command-line tool, the
//! log format, the C, FTI and Python libraries) import each other, directly or around a loop; no
//! module of the core library uses one drawn above it; the core library
//! depends on no command-line, plotting or log-subscriber crate, and only
//! its `env` module reads the process environment. Reads the sources;
//! builds nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The top-level modules of `src/`, highest first, as in
/// docs/ARCHITECTURE.md; a module may use only those on later lines.
const LAYERS: &[&[&str]] = &[
    &["internals"],
    &["checkpoint"],
    &["manager"],
    &["recovery"],
    &["catalog"],
    &["scheme"],
    &["error"],
    &["comm"],
    &["config"],
    &["level"],
    &["format"],
    &["region"],
    &["topology"],
    &["metrics"],
    &["node"],
    &["auth"],
    &["safefs"],
    &["env"],
];

/// Every `.rs` file under `dir`, test modules and `bin/` left out.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "bin" {
                sources(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" && name != "testing.rs" {
            out.push(path);
        }
    }
}

/// The module path of a file (`src/level/l1/mod.rs` is `level::l1`).
fn module_of(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The code of a file without comments and without its unit tests.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests {") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths a file names through `crate::`, `super::` or `self::`
/// (each a list of segments, the anchor first), use-groups expanded one
/// level.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for anchor in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(anchor) {
            let start = from + at;
            from = start + anchor.len();
            if start > 0 && is_ident(bytes[start - 1] as char) {
                continue;
            }
            let mut path = vec![anchor.trim_end_matches("::").to_string()];
            let rest = &code[from..];
            let seg: String = rest
                .chars()
                .take_while(|c| is_ident(*c) || *c == ':')
                .collect();
            path.extend(
                seg.split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
            );
            let after = &rest[seg.len()..];
            if let Some(group) = after.strip_prefix('{') {
                // `use crate::a::{b::c, d}`: each item's first segment.
                let group: String = group.chars().take_while(|c| *c != '}').collect();
                for item in group.split(',') {
                    let first: String = item.trim().chars().take_while(|c| is_ident(*c)).collect();
                    if !first.is_empty() {
                        let mut p = path.clone();
                        p.push(first);
                        out.push(p);
                    }
                }
            }
            out.push(path);
        }
    }
    out
}

/// The file a path from `here` (a module path) leads to, by the longest
/// prefix that is a file.
fn resolve<'a>(
    files: &'a BTreeMap<Vec<String>, PathBuf>,
    here: &[String],
    path: &[String],
) -> Option<&'a PathBuf> {
    let mut base: Vec<String> = match path[0].as_str() {
        "crate" => Vec::new(),
        "self" => here.to_vec(),
        _ => here[..here.len().saturating_sub(1)].to_vec(),
    };
    let mut rest = &path[1..];
    while rest.first().map(String::as_str) == Some("super") {
        base.pop();
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    (0..=base.len())
        .rev()
        .find_map(|n| files.get(&base[..n].to_vec()))
}

/// The import graph of the crate whose sources are in `dir` (relative to
/// the repository).
fn graph(dir: &str) -> (BTreeMap<PathBuf, BTreeSet<PathBuf>>, PathBuf) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut list = Vec::new();
    sources(&root, &mut list);
    let files: BTreeMap<Vec<String>, PathBuf> = list
        .iter()
        .map(|f| (module_of(&root, f), f.clone()))
        .collect();
    let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for (module, file) in &files {
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        let to = edges.entry(file.clone()).or_default();
        for path in paths_in(&code) {
            if let Some(target) = resolve(&files, module, &path) {
                if target != file {
                    to.insert(target.clone());
                }
            }
        }
    }
    (edges, root)
}

/// Files on a loop of imports, if any (depth-first search for a back edge).
fn a_loop(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Option<Vec<PathBuf>> {
    fn visit(
        node: &PathBuf,
        edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        stack: &mut Vec<PathBuf>,
        done: &mut BTreeSet<PathBuf>,
    ) -> Option<Vec<PathBuf>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            return Some(stack[at..].to_vec());
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, edges, stack, done) {
                return Some(found);
            }
        }
        stack.pop();
        done.insert(node.clone());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|n| visit(n, edges, &mut Vec::new(), &mut done))
}

#[test]
fn no_file_imports_another_that_imports_it_back() {
    for (dir, at_least) in [
        ("src", 70),
        ("runtime/src", 15),
        ("cli/src", 10),
        ("log/src", 1),
        ("ffi/src", 5),
        ("ffi/fti/src", 5),
        ("ffi/python/src", 5),
    ] {
        no_loop_in(dir, at_least);
    }
}

fn no_loop_in(dir: &str, at_least: usize) {
    let (edges, root) = graph(dir);
    assert!(
        edges.len() >= at_least,
        "too few files read under {}",
        root.display()
    );
    // A module's own children are declared by it (`mod x;`), which this
    // reading does not count, so parents and children may use each other.
    let parent_child = |a: &PathBuf, b: &PathBuf| {
        let dir = |p: &PathBuf| match p.file_name().and_then(|n| n.to_str()) {
            Some("mod.rs") => p.parent().map(Path::to_path_buf),
            _ => None,
        };
        dir(a).is_some_and(|d| b.starts_with(&d)) || dir(b).is_some_and(|d| a.starts_with(&d))
    };
    let siblings: BTreeMap<PathBuf, BTreeSet<PathBuf>> = edges
        .iter()
        .map(|(a, to)| {
            let to = to.iter().filter(|b| !parent_child(a, b)).cloned().collect();
            (a.clone(), to)
        })
        .collect();
    if let Some(found) = a_loop(&siblings) {
        let names: Vec<String> = found
            .iter()
            .map(|p| p.strip_prefix(&root).unwrap_or(p).display().to_string())
            .collect();
        panic!("an import loop: {}", names.join(" -> "));
    }
}

#[test]
fn no_module_uses_one_drawn_above_it() {
    let (edges, root) = graph("src");
    let top = |file: &PathBuf| -> Option<String> {
        let rel = file.strip_prefix(&root).ok()?;
        let first = rel.components().next()?.as_os_str().to_string_lossy();
        Some(first.trim_end_matches(".rs").to_string())
    };
    let rank = |top: &str| LAYERS.iter().position(|line| line.contains(&top));
    let mut wrong = Vec::new();
    for (from, to) in &edges {
        let Some(a_top) = top(from) else { continue };
        let Some(a) = rank(&a_top) else { continue };
        for target in to {
            let Some(b_top) = top(target) else { continue };
            let Some(b) = rank(&b_top) else { continue };
            if a_top != b_top && b <= a {
                wrong.push(format!(
                    "{} uses {}",
                    from.strip_prefix(&root).unwrap().display(),
                    target.strip_prefix(&root).unwrap().display()
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "upward imports:\n{}", wrong.join("\n"));
    // Every top-level module is placed.
    let tops: BTreeSet<String> = edges
        .keys()
        .filter_map(top)
        .filter(|t| t != "lib")
        .collect();
    for top in tops {
        assert!(
            LAYERS.iter().any(|line| line.contains(&top.as_str())),
            "src/{top} is not drawn in the layers of docs/ARCHITECTURE.md"
        );
    }
}

/// The names of the `[dependencies]` of the manifest `path`.
fn dependencies(path: &str) -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap();
    let mut section = String::new();
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_string();
        } else if section == "[dependencies]" && !line.is_empty() && !line.starts_with('#') {
            // `name = ...` or `name.workspace = true`.
            if let Some((key, _)) = line.split_once('=') {
                let name = key.split('.').next().unwrap_or(key);
                out.push(name.trim().to_string());
            }
        }
    }
    out
}

#[test]
fn a_program_that_only_checkpoints_pulls_no_cli_plotting_or_log_subscriber() {
    let core = dependencies("Cargo.toml");
    assert!(core.len() >= 10, "too few dependencies read: {core:?}");
    for banned in ["clap", "plotters", "tracing-subscriber", "anyhow", "rand"] {
        assert!(
            !core.iter().any(|d| d == banned),
            "the core library depends on {banned}"
        );
    }
    // The tool has them, so the reading above can find them.
    assert!(dependencies("cli/Cargo.toml").iter().any(|d| d == "clap"));
}

#[test]
fn only_the_env_module_reads_the_process_environment() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let mut readers: Vec<String> = files
        .iter()
        .filter(|f| {
            let code = code_of(&std::fs::read_to_string(f).unwrap());
            [
                "env::var",
                "env::vars",
                "env::var_os",
                "env::set_var",
                "env::remove_var",
            ]
            .iter()
            .any(|call| code.contains(&format!("std::{call}(")))
        })
        .map(|f| f.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    readers.sort();
    assert_eq!(readers, vec!["env.rs".to_string()]);
}

#[test]
fn unit_tests_live_in_sibling_files() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut inline = Vec::new();
    let mut read = 0;
    for dir in [
        "src",
        "runtime/src",
        "cli/src",
        "ffi/src",
        "ffi/fti/src",
        "ffi/python/src",
    ] {
        let mut files = Vec::new();
        sources(&base.join(dir), &mut files);
        for f in files {
            read += 1;
            let text = std::fs::read_to_string(&f).unwrap();
            if text
                .lines()
                .any(|l| l.trim_start().starts_with("mod tests {"))
            {
                inline.push(f.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    assert!(read > 100, "too few files read: {read}");
    assert!(
        inline.is_empty(),
        "unit tests inline (put them in a sibling tests.rs, docs/TESTING.md):\n{}",
        inline.join("\n")
    );
}

/// Each redundancy scheme has a directory of its own under `src/scheme/`,
/// and the registry lists every one of them, once: a scheme added without
/// its line, or a line left after its directory went, fails here.
#[test]
fn every_scheme_directory_is_registered_once() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/scheme");
    let registry = std::fs::read_to_string(root.join("registry.rs")).unwrap();
    let code = code_of(&registry);
    let start = code
        .find("const SCHEMES")
        .expect("the registry's SCHEMES table");
    let table = &code[start..start + code[start..].find("];").expect("the table's end")];
    let mut dirs: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 4, "{dirs:?}");
    let mut listed: Vec<String> = table
        .split(|c: char| !is_ident(c) && c != ':')
        .filter_map(|w| w.strip_suffix("::SCHEME"))
        .map(str::to_string)
        .collect();
    listed.sort();
    assert_eq!(listed, dirs, "src/scheme/registry.rs lists {listed:?}");
}

/// `frame::internals` opens the library's insides to frame's own crates
/// only: it stays out of the documentation programs read.
#[test]
fn internals_are_hidden_from_the_documentation() {
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let code = code_of(&lib);
    let at = code
        .find("pub mod internals;")
        .expect("the internals module");
    let before: Vec<&str> = code[..at]
        .lines()
        .rev()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(1)
        .collect();
    assert_eq!(
        before,
        ["#[doc(hidden)]"],
        "src/lib.rs: internals must be #[doc(hidden)]"
    );
}
