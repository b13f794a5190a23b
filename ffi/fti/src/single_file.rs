//! The single file of a checkpoint's global data sets, written at
//! `FTI_L4_H5_SINGLE` with `h5_single_file_enable = 1`, from which a run on
//! any number of ranks restarts (`[restart] failure = 3`).
//!
//! FTI writes one HDF5 file; frame writes one directory,
//! `<h5_single_file_dir>/<prefix>-ID<checkpoint id, 8 digits>.frame/`,
//! holding each global data set whole as `dataset-<id>.bin` (its elements
//! in row-major order) and `datasets.json` (each data set's id, name,
//! dimensions and element size), written last, and each data set's block
//! checksums as `dataset-<id>.crc` ([`blocks`]). The ranks write their
//! subsets straight from the protected variables into a directory of a
//! temporary name, sync them, sum a share of the blocks each, and rank 0
//! names the directory once every rank is done; an older single file goes
//! then, unless `h5_single_file_keep = 1`.

mod blocks;

use crate::status::Failure;
use crate::subsets::{check_subset, Datasets, Global, Subset};
use frame_core::comm::{agree_on_problems, Comm};
use frame_core::config::fti::SingleFile;
use frame_core::internals::safefs::{Dir, Kind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::os::raw::c_int;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

const SUFFIX: &str = ".frame";
const TABLE: &str = "datasets.json";
/// The largest table read back.
const MAX_TABLE: u64 = 16 << 20;

/// The single file's table of data sets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    /// The checkpoint id the program gave.
    checkpoint: i64,
    /// The bytes each checksum covers.
    block: u64,
    datasets: Vec<Entry>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    id: c_int,
    name: String,
    dims: Vec<u64>,
    width: usize,
}

impl Entry {
    /// The global data set it records.
    fn global(&self) -> Global {
        Global {
            name: self.name.clone(),
            dims: self.dims.clone(),
            width: self.width,
            recovered_dims: true,
        }
    }
}

/// A single file found to restart from.
pub(crate) struct Found {
    dir: PathBuf,
    table: Table,
}

impl Found {
    /// The dimensions global data set `did` has in the file.
    pub fn dims(&self, did: c_int) -> Result<Vec<u64>, Failure> {
        self.entry(did).map(|e| e.dims.clone())
    }

    fn entry(&self, did: c_int) -> Result<&Entry, Failure> {
        self.table
            .datasets
            .iter()
            .find(|e| e.id == did)
            .ok_or_else(|| {
                Failure::no_recovery(format!(
                    "{} holds no global data set {did}",
                    self.dir.display()
                ))
            })
    }

    /// Its directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Reads variable `id`'s subset into `memory`, its elements of
    /// `width` bytes.
    pub fn read(
        &self,
        id: u32,
        subset: &Subset,
        memory: &mut [u8],
        width: usize,
    ) -> Result<(), Failure> {
        let entry = self.entry(subset.did)?;
        let global = entry.global();
        check(id, &global, subset, memory.len(), width)
            .map_err(|f| Failure::no_recovery(f.message))?;
        let name = data_file(subset.did);
        let path = self.dir.join(&name);
        let bytes = global.bytes().ok_or_else(|| {
            Failure::no_recovery(format!(
                "{}: data set {} is too large",
                path.display(),
                entry.name
            ))
        })?;
        let dir = Dir::open(&self.dir).map_err(|e| Failure::no_recovery(e.to_string()))?;
        let mut file = blocks::Checked::open(&dir, &path, &name, bytes)
            .map_err(|e| Failure::no_recovery(format!("variable {id}: {e}")))?;
        for (at, from, len) in Runs::new(&global.dims, subset, global.width as u64) {
            let into = &mut memory[from as usize..(from + len) as usize];
            file.read_at(into, at)
                .map_err(|e| Failure::no_recovery(format!("variable {id}: {e}")))?;
        }
        Ok(())
    }
}

/// The file of global data set `did`.
fn data_file(did: c_int) -> String {
    format!("dataset-{did}.bin")
}

/// The directory name of checkpoint `id`'s single file.
fn dir_name(prefix: &str, id: i64) -> String {
    format!("{prefix}-ID{id:08}{SUFFIX}")
}

/// Checks that variable `id` (`bytes` in elements of `width` bytes),
/// subset `subset` of `global`, fits both.
fn check(
    id: u32,
    global: &Global,
    subset: &Subset,
    bytes: usize,
    width: usize,
) -> Result<(), Failure> {
    check_subset(global, subset)
        .map_err(|f| Failure::new(format!("variable {id}: {}", f.message)))?;
    if width != global.width {
        return Err(Failure::new(format!(
            "variable {id} has elements of {width} bytes, the global data set {} of {}",
            global.name, global.width
        )));
    }
    let count = bytes / width.max(1);
    if subset.elements() != Some(count as u64) {
        return Err(Failure::new(format!(
            "variable {id} holds {count} elements, its subset of {} {:?}",
            global.name, subset.count
        )));
    }
    Ok(())
}

/// The contiguous runs of a subset: (byte in the data set's file, byte in
/// the variable, bytes), the innermost dimension's elements being
/// contiguous in both.
struct Runs<'a> {
    dims: &'a [u64],
    subset: &'a Subset,
    width: u64,
    /// The index in the subset of every dimension but the innermost.
    at: Vec<u64>,
    from: u64,
    done: bool,
}

impl<'a> Runs<'a> {
    fn new(dims: &'a [u64], subset: &'a Subset, width: u64) -> Self {
        let n = dims.len();
        Self {
            dims,
            subset,
            width,
            at: vec![0; n.saturating_sub(1)],
            from: 0,
            done: n == 0 || subset.count.contains(&0),
        }
    }
}

impl Iterator for Runs<'_> {
    type Item = (u64, u64, u64);

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let n = self.dims.len();
        let (offset, count) = (&self.subset.offset, &self.subset.count);
        // Row-major: the element index of the run's first element.
        let mut element = 0u64;
        for (k, (o, d)) in offset.iter().zip(self.dims).enumerate() {
            let i = o + self.at.get(k).copied().unwrap_or(0);
            element = element * d + i;
        }
        let len = count[n - 1] * self.width;
        let run = (element * self.width, self.from, len);
        self.from += len;
        // The next index, the outermost dimension slowest.
        let mut k = n - 1;
        loop {
            if k == 0 {
                self.done = true;
                break;
            }
            k -= 1;
            self.at[k] += 1;
            if self.at[k] < count[k] {
                break;
            }
            self.at[k] = 0;
        }
        Some(run)
    }
}

/// A protected variable's memory and its element size in bytes.
pub(crate) type Memory<'a> = (&'a [u8], usize);

/// Writes the single file of checkpoint `id`: every global data set whole,
/// each rank writing its variables' subsets from `vars`. Collective.
pub(crate) fn write(
    comm: &dyn Comm,
    place: &SingleFile,
    id: c_int,
    datasets: &Datasets,
    vars: &BTreeMap<u32, Memory<'_>>,
) -> Result<(), Failure> {
    let table = Table {
        checkpoint: i64::from(id),
        block: blocks::BLOCK,
        datasets: datasets
            .global
            .iter()
            .map(|(did, g)| Entry {
                id: *did,
                name: g.name.clone(),
                dims: g.dims.clone(),
                width: g.width,
            })
            .collect(),
    };
    // Every rank's subsets fit, and every rank defined the same data sets
    // as rank 0.
    let mine = serde_json::to_vec(&table.datasets).unwrap_or_default();
    let mut first = mine.clone();
    comm.broadcast(&mut first, 0)?;
    let mut problem =
        (first != mine).then(|| "its global data sets differ from rank 0's".to_string());
    for (var, subset) in &datasets.subsets {
        let checked = match (vars.get(var), datasets.global.get(&subset.did)) {
            (Some((memory, width)), Some(g)) => check(*var, g, subset, memory.len(), *width),
            (None, _) => Err(Failure::new(format!("variable {var} is not protected"))),
            (_, None) => Err(Failure::new(format!("no global data set {}", subset.did))),
        };
        if let Err(f) = checked {
            problem.get_or_insert(f.message);
        }
    }
    agreed(comm, problem)?;
    let name = dir_name(&place.prefix, i64::from(id));
    let incoming = format!(".{name}.incoming");
    // Rank 0 makes the directory and every data set's file at its length.
    let made = if comm.rank() == 0 {
        prepare(&place.dir, &incoming, &table).err()
    } else {
        None
    };
    agreed(comm, made)?;
    let wrote = write_subsets(&place.dir, &incoming, datasets, vars).err();
    agreed(comm, wrote)?;
    let summed = sum_blocks(&place.dir, &incoming, &table, comm.rank(), comm.size()).err();
    agreed(comm, summed)?;
    let named = if comm.rank() == 0 {
        commit(place, &incoming, &name, &table).err()
    } else {
        None
    };
    agreed(comm, named)
}

/// Fails on every rank when any rank had a problem, naming the ranks.
fn agreed(comm: &dyn Comm, problem: Option<String>) -> Result<(), Failure> {
    let all = agree_on_problems(comm, problem.as_deref())?;
    if all.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = all.iter().map(|(r, p)| format!("rank {r}: {p}")).collect();
    Err(Failure::new(format!(
        "the single file: {}",
        list.join("; ")
    )))
}

/// The directory of temporary name `incoming` in `base`, with an empty
/// file of each data set's length and one of its sums' length.
fn prepare(base: &Path, incoming: &str, table: &Table) -> Result<(), String> {
    let base = Dir::open_or_create(base).map_err(|e| e.to_string())?;
    clear(&base, incoming)?;
    let dir = base.sub(incoming, true).map_err(|e| e.to_string())?;
    for e in &table.datasets {
        let bytes = e
            .global()
            .bytes()
            .ok_or_else(|| format!("global data set {} is too large", e.name))?;
        let data = data_file(e.id);
        for (name, len) in [
            (blocks::sums_file(&data), blocks::sums_len(bytes)),
            (data, bytes),
        ] {
            let f = dir.create_replacing(&name).map_err(|x| x.to_string())?;
            f.set_len(len)
                .map_err(|x| format!("{}: {x}", dir.join(&name).display()))?;
        }
    }
    Ok(())
}

/// Sums this rank's share of every data set's blocks (once every rank's
/// subsets are synced).
fn sum_blocks(
    base: &Path,
    incoming: &str,
    table: &Table,
    rank: usize,
    ranks: usize,
) -> Result<(), String> {
    let dir = Dir::open(&base.join(incoming)).map_err(|e| e.to_string())?;
    for e in &table.datasets {
        let bytes = e
            .global()
            .bytes()
            .ok_or_else(|| format!("global data set {} is too large", e.name))?;
        blocks::sum_share(&dir, &data_file(e.id), bytes, rank, ranks)?;
    }
    Ok(())
}

/// Writes this rank's subsets into the files and syncs them.
fn write_subsets(
    base: &Path,
    incoming: &str,
    datasets: &Datasets,
    vars: &BTreeMap<u32, Memory<'_>>,
) -> Result<(), String> {
    let dir = Dir::open(&base.join(incoming)).map_err(|e| e.to_string())?;
    let mut open = BTreeMap::new();
    for (id, subset) in &datasets.subsets {
        let (Some((memory, _)), Some(global)) = (vars.get(id), datasets.global.get(&subset.did))
        else {
            continue;
        };
        let name = data_file(subset.did);
        let file = match open.entry(subset.did) {
            std::collections::btree_map::Entry::Occupied(f) => f.into_mut(),
            std::collections::btree_map::Entry::Vacant(slot) => {
                slot.insert(dir.open_rw(&name).map_err(|e| e.to_string())?)
            }
        };
        for (at, from, len) in Runs::new(&global.dims, subset, global.width as u64) {
            file.write_all_at(&memory[from as usize..(from + len) as usize], at)
                .map_err(|e| format!("variable {id}: {}: {e}", dir.join(&name).display()))?;
        }
    }
    for (did, file) in open {
        file.sync_data()
            .map_err(|e| format!("{}: {e}", dir.join(&data_file(did)).display()))?;
    }
    Ok(())
}

/// Writes the table, names the directory, and removes older single files
/// unless they are kept.
fn commit(place: &SingleFile, incoming: &str, name: &str, table: &Table) -> Result<(), String> {
    let base = Dir::open(&place.dir).map_err(|e| e.to_string())?;
    let dir = base.sub(incoming, false).map_err(|e| e.to_string())?;
    let body = serde_json::to_vec_pretty(table).map_err(|e| e.to_string())?;
    dir.write_atomic(TABLE, &body, "0")
        .map_err(|e| e.to_string())?;
    dir.sync().map_err(|e| e.to_string())?;
    clear(&base, name)?;
    base.rename(incoming, &base, name)
        .map_err(|e| e.to_string())?;
    base.sync().map_err(|e| e.to_string())?;
    if !place.keep {
        let prefix = format!("{}-ID", place.prefix);
        for (entry, kind) in base.entries().map_err(|e| e.to_string())? {
            if kind == Kind::Dir
                && entry != name
                && entry.starts_with(&prefix)
                && entry.ends_with(SUFFIX)
            {
                clear(&base, &entry)?;
            }
        }
    }
    Ok(())
}

/// Removes directory `name` in `base` and the files in it, if it exists.
fn clear(base: &Dir, name: &str) -> Result<(), String> {
    let Some(dir) = base.try_sub(name).map_err(|e| e.to_string())? else {
        return Ok(());
    };
    for (entry, kind) in dir.entries().map_err(|e| e.to_string())? {
        if kind == Kind::File {
            dir.remove_file(&entry).map_err(|e| e.to_string())?;
        }
    }
    drop(dir);
    base.remove_dir_if_empty(name);
    Ok(())
}

/// The newest single file under `place` (rank 0 looks, every rank learns
/// it); `FTI_NREC` when there is none. Collective.
pub(crate) fn find(comm: &dyn Comm, place: &SingleFile) -> Result<Found, Failure> {
    let mut found = Vec::new();
    if comm.rank() == 0 {
        found = newest(place)
            .map(|(dir, _)| dir.into_os_string().into_encoded_bytes())
            .unwrap_or_default();
    }
    comm.broadcast(&mut found, 0)?;
    if found.is_empty() {
        return Err(Failure::no_recovery(format!(
            "[restart] failure = 3, but {} holds no single file {}-ID*{SUFFIX} to restart from",
            place.dir.display(),
            place.prefix
        )));
    }
    // SAFETY: bytes of an OsString rank 0 encoded the same way.
    let dir = PathBuf::from(unsafe { std::ffi::OsString::from_encoded_bytes_unchecked(found) });
    let table = read_table(&dir).map_err(Failure::no_recovery)?;
    Ok(Found { dir, table })
}

/// The newest committed single file and its id.
fn newest(place: &SingleFile) -> Option<(PathBuf, i64)> {
    let base = Dir::open(&place.dir).ok()?;
    let prefix = format!("{}-ID", place.prefix);
    base.entries()
        .ok()?
        .into_iter()
        .filter(|(_, kind)| *kind == Kind::Dir)
        .filter_map(|(name, _)| {
            let id: i64 = name
                .strip_prefix(&prefix)?
                .strip_suffix(SUFFIX)?
                .parse()
                .ok()?;
            let dir = place.dir.join(&name);
            read_table(&dir).ok().map(|_| (dir, id))
        })
        .max_by_key(|(_, id)| *id)
}

fn read_table(dir: &Path) -> Result<Table, String> {
    let bytes = Dir::open(dir)
        .and_then(|d| d.read_capped(TABLE, MAX_TABLE))
        .map_err(|e| e.to_string())?;
    let table: Table = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{}: {e}", dir.join(TABLE).display()))?;
    if table.block != blocks::BLOCK {
        return Err(format!(
            "{}: checksums of blocks of {} bytes; this libfti sums blocks of {}",
            dir.join(TABLE).display(),
            table.block,
            blocks::BLOCK
        ));
    }
    Ok(table)
}

#[cfg(test)]
mod tests;
