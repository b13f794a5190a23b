//! The hosts a job runs on, when its nodes are machines rather than
//! virtual nodes of this one: from `--hosts a:4,b`, from a hostfile in
//! mpirun's format (`a slots=4`), or from Slurm's description of the
//! allocation. Each host is one node; a host's slots are the ranks it runs.

use std::path::Path;

/// One host and the ranks it may run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Host {
    /// The name the launcher reaches it by (a host name, an address, or an
    /// alias of the user's ssh configuration).
    pub(crate) name: String,
    /// Ranks it may run, when the list says.
    pub(crate) slots: Option<usize>,
}

/// Most hosts a list may name (the runtime's node limit).
const MAX_HOSTS: usize = super::MAX_NODES;
/// Largest hostfile read.
const MAX_HOSTFILE: u64 = 1 << 20;

fn host(name: &str, slots: Option<usize>, whence: &str) -> Result<Host, String> {
    let ok = !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._@:[]".contains(c));
    if !ok {
        return Err(format!("{whence}: `{name}` is not a host name"));
    }
    if slots == Some(0) {
        return Err(format!("{whence}: host {name} has no slots"));
    }
    Ok(Host {
        name: name.to_string(),
        slots,
    })
}

fn slots(value: &str, whence: &str) -> Result<usize, String> {
    value
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=super::MAX_RANKS_PER_NODE).contains(n))
        .ok_or_else(|| {
            format!(
                "{whence}: slots `{value}` must be between 1 and {}",
                super::MAX_RANKS_PER_NODE
            )
        })
}

/// Checks the list as a whole: not empty, not too long, no host twice.
fn checked(hosts: Vec<Host>, whence: &str) -> Result<Vec<Host>, String> {
    if hosts.is_empty() {
        return Err(format!("{whence}: no hosts"));
    }
    if hosts.len() > MAX_HOSTS {
        return Err(format!(
            "{whence}: {} hosts, more than the {MAX_HOSTS} a job may have",
            hosts.len()
        ));
    }
    for (i, h) in hosts.iter().enumerate() {
        if hosts[..i].iter().any(|o| o.name == h.name) {
            return Err(format!(
                "{whence}: host {} is listed twice (each host is one node; give it slots, `{}:4`, for more ranks)",
                h.name, h.name
            ));
        }
    }
    Ok(hosts)
}

/// Parses `--hosts`: host names separated by commas, each with an optional
/// `:slots`.
pub(crate) fn parse_list(list: &str) -> Result<Vec<Host>, String> {
    let whence = "--hosts";
    let hosts = list
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|item| match item.rsplit_once(':') {
            Some((name, n)) if !name.ends_with(':') && !n.contains(']') => {
                host(name, Some(slots(n, whence)?), whence)
            }
            _ => host(item, None, whence),
        })
        .collect::<Result<Vec<_>, _>>()?;
    checked(hosts, whence)
}

/// Reads a hostfile: one host per line, optionally followed by `slots=N`
/// (mpirun's `max_slots=` is accepted and ignored); `#` starts a comment.
pub(crate) fn read_file(path: &Path) -> Result<Vec<Host>, String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_HOSTFILE).read_to_string(&mut text))
        .map_err(|e| format!("hostfile {}: {e}", path.display()))?;
    parse_file(&text, &path.display().to_string())
}

/// [`read_file`] on text already read; `name` names it in errors.
pub(crate) fn parse_file(text: &str, name: &str) -> Result<Vec<Host>, String> {
    let mut hosts = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let whence = format!("hostfile {name}, line {}", i + 1);
        let line = line.split('#').next().unwrap_or("").trim();
        let mut words = line.split_whitespace();
        let Some(name) = words.next() else { continue };
        let mut n = None;
        for w in words {
            match w.split_once('=') {
                Some(("slots", v)) => n = Some(slots(v, &whence)?),
                Some(("max_slots" | "max-slots", _)) => {}
                _ => return Err(format!("{whence}: unknown field `{w}` (expected slots=N)")),
            }
        }
        hosts.push(host(name, n, &whence)?);
    }
    checked(hosts, &format!("hostfile {name}"))
}

/// The hosts of a Slurm allocation, from its node list (`n[01-03],gpu7`)
/// and its tasks per node (`4`, `2(x3),1`).
pub(crate) fn from_slurm(
    nodelist: &str,
    tasks_per_node: Option<&str>,
) -> Result<Vec<Host>, String> {
    let names = expand_nodelist(nodelist)?;
    let counts = match tasks_per_node {
        Some(t) => expand_tasks(t)?,
        None => Vec::new(),
    };
    let whence = frame::env::SLURM_NODELIST.to_string();
    let hosts = names
        .iter()
        .enumerate()
        .map(|(i, n)| host(n, counts.get(i).copied(), &whence))
        .collect::<Result<Vec<_>, _>>()?;
    checked(hosts, &whence)
}

/// Expands Slurm's compressed host list.
fn expand_nodelist(list: &str) -> Result<Vec<String>, String> {
    let whence = frame::env::SLURM_NODELIST.to_string();
    let bad = || format!("{whence}: cannot read `{list}`");
    let mut out = Vec::new();
    let mut rest = list.trim();
    while !rest.is_empty() {
        // The next item ends at a comma outside brackets.
        let mut depth = 0i32;
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '[' => depth += 1,
                    ']' => depth -= 1,
                    _ => {}
                }
                c == ',' && depth == 0
            })
            .map(|(i, _)| i)
            .unwrap_or(rest.len());
        let item = &rest[..end];
        rest = rest[end..].trim_start_matches(',');
        match item.split_once('[') {
            None => out.push(item.to_string()),
            Some((prefix, ranges)) => {
                let (ranges, suffix) = ranges.split_once(']').ok_or_else(bad)?;
                for range in ranges.split(',') {
                    let (a, b) = range.split_once('-').unwrap_or((range, range));
                    let width = a.len();
                    let (lo, hi): (u64, u64) =
                        (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                    if hi < lo || hi - lo >= MAX_HOSTS as u64 {
                        return Err(bad());
                    }
                    for i in lo..=hi {
                        out.push(format!("{prefix}{i:0width$}{suffix}"));
                        if out.len() > MAX_HOSTS {
                            return Err(format!("{whence}: more than {MAX_HOSTS} hosts"));
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Expands Slurm's tasks per node (`2(x3),1` is 2, 2, 2, 1).
fn expand_tasks(list: &str) -> Result<Vec<usize>, String> {
    let whence = frame::env::SLURM_TASKS_PER_NODE.to_string();
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim) {
        let (n, times) = match item.split_once("(x") {
            Some((n, t)) => (n, t.trim_end_matches(')')),
            None => (item, "1"),
        };
        let n = slots(n, &whence)?;
        let times: usize = times
            .parse()
            .ok()
            .filter(|t| (1..=MAX_HOSTS).contains(t))
            .ok_or_else(|| format!("{whence}: cannot read `{list}`"))?;
        if out.len() + times > MAX_HOSTS {
            return Err(format!("{whence}: more than {MAX_HOSTS} nodes"));
        }
        out.extend(std::iter::repeat_n(n, times));
    }
    Ok(out)
}

/// The ranks per node of a job on `hosts`: `given` (checked against every
/// host's slots), else the hosts' slots (the same on every host), else 1.
pub(crate) fn ranks_per_node(hosts: &[Host], given: Option<usize>) -> Result<usize, String> {
    if let Some(n) = given {
        if let Some(h) = hosts.iter().find(|h| h.slots.is_some_and(|s| s < n)) {
            return Err(format!(
                "--ranks-per-node {n}: host {} has only {} slot(s)",
                h.name,
                h.slots.unwrap_or(0)
            ));
        }
        return Ok(n);
    }
    let mut slots = hosts.iter().filter_map(|h| h.slots.map(|s| (h, s)));
    let Some((first, n)) = slots.next() else {
        return Ok(1);
    };
    if let Some((other, m)) = slots.find(|(_, m)| *m != n) {
        return Err(format!(
            "hosts {} ({n} slots) and {} ({m} slots) differ: frame runs the same number of ranks on every node; pass --ranks-per-node",
            first.name, other.name
        ));
    }
    Ok(n)
}

#[cfg(test)]
mod tests;
