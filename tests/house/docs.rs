//! The front door and the documents it leads to: every relative link in
//! README.md and docs/ names a file that exists, the README stays a front
//! door (at most about 200 lines, none of them long), and docs/README.md
//! leads to every document. Reads files; builds nothing.

use std::path::{Path, PathBuf};

fn documents() -> Vec<PathBuf> {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![base.join("README.md")];
    out.extend(pages());
    out
}

/// The Markdown files of docs/.
fn pages() -> Vec<PathBuf> {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for entry in std::fs::read_dir(base.join("docs")).unwrap().flatten() {
        if entry.path().extension().is_some_and(|e| e == "md") {
            out.push(entry.path());
        }
    }
    out.sort();
    out
}

/// The targets of the Markdown links `[text](target)` in `text`.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        if let Some(end) = rest.find(')') {
            out.push(rest[..end].to_string());
        }
    }
    out
}

#[test]
fn every_relative_link_resolves() {
    let docs = documents();
    assert!(docs.len() >= 10, "too few documents read: {docs:?}");
    let mut broken = Vec::new();
    let mut checked = 0;
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        for target in links(&text) {
            let path = target.split('#').next().unwrap_or("");
            if path.is_empty() || path.contains("://") || path.contains(' ') {
                continue;
            }
            checked += 1;
            if !doc.parent().unwrap().join(path).exists() {
                broken.push(format!("{}: {target}", doc.display()));
            }
        }
    }
    assert!(checked >= 20, "too few links checked: {checked}");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_is_a_front_door() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(base.join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 200,
        "README.md has {lines} lines; depth goes to docs/"
    );
    for command in ["cargo run --release --example heat2d", "\nscripts/test\n"] {
        assert!(readme.contains(command), "README.md lost `{command}`");
    }
    // One line per feature: the depth is in the documents it names.
    let long: Vec<String> = (readme.lines().enumerate())
        .filter(|(_, l)| l.chars().count() > 160)
        .map(|(n, l)| format!("line {}: {} characters", n + 1, l.chars().count()))
        .collect();
    assert!(
        long.is_empty(),
        "README.md has long lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn the_index_of_the_documents_leads_to_every_one() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let index = std::fs::read_to_string(base.join("docs/README.md")).unwrap();
    let linked = links(&index);
    let pages = pages();
    assert!(pages.len() >= 10, "too few documents read: {pages:?}");
    let missing: Vec<String> = (pages.iter())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|name| name != "README.md" && !linked.iter().any(|l| l == name))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/README.md does not lead to {missing:?}"
    );
}
