use super::*;

fn subset(offset: &[u64], count: &[u64]) -> Subset {
    Subset {
        did: 0,
        offset: offset.to_vec(),
        count: count.to_vec(),
    }
}

/// Element positions of a subset, by the runs, against a direct count.
#[test]
fn runs_cover_a_hyperslab_in_row_major_order() {
    let dims = [4u64, 5, 6];
    let s = subset(&[1, 2, 3], &[2, 3, 2]);
    let mut from_runs = Vec::new();
    let mut next = 0;
    for (at, from, len) in Runs::new(&dims, &s, 8) {
        assert_eq!(from, next, "the variable is filled in order");
        next += len;
        for e in 0..len / 8 {
            from_runs.push(at / 8 + e);
        }
    }
    let mut direct = Vec::new();
    for i in 1..3 {
        for j in 2..5 {
            for k in 3..5 {
                direct.push((i * 5 + j) * 6 + k);
            }
        }
    }
    assert_eq!(from_runs, direct);
    assert_eq!(next, 2 * 3 * 2 * 8);
}

#[test]
fn one_dimension_is_one_run_and_an_empty_subset_none() {
    let runs: Vec<_> = Runs::new(&[100], &subset(&[10], &[25]), 4).collect();
    assert_eq!(runs, vec![(40, 0, 100)]);
    assert_eq!(Runs::new(&[4, 4], &subset(&[0, 0], &[0, 4]), 4).count(), 0);
}

#[test]
fn single_file_names_sort_by_checkpoint() {
    assert_eq!(dir_name("VPR-h5", 7), "VPR-h5-ID00000007.frame");
}

/// A grid of 300 x 100 doubles (240,000 bytes: blocks 0..3 of the sums)
/// written by 3 ranks in row bands and read back by 2 in other row bands:
/// reader 0's rows are blocks 0 and 1, reader 1's blocks 1 to 3.
mod checksums {
    use super::*;
    use crate::status::FTI_NREC;
    use frame_core::comm::LocalComm;

    const ROWS: u64 = 300;
    const COLS: u64 = 100;

    fn value(i: u64, j: u64) -> f64 {
        (i * 1000 + j) as f64 * 0.5
    }

    fn band(rank: u64, ranks: u64) -> (u64, u64) {
        (ROWS * rank / ranks, ROWS * (rank + 1) / ranks)
    }

    fn datasets(first: u64, end: u64) -> Datasets {
        let mut d = Datasets::default();
        d.global.insert(
            0,
            Global {
                name: "grid".into(),
                dims: vec![ROWS, COLS],
                width: 8,
                recovered_dims: false,
            },
        );
        d.subsets.insert(
            1,
            Subset {
                did: 0,
                offset: vec![first, 0],
                count: vec![end - first, COLS],
            },
        );
        d
    }

    fn bytes_of(first: u64, end: u64) -> Vec<u8> {
        (first..end)
            .flat_map(|i| (0..COLS).map(move |j| value(i, j)))
            .flat_map(f64::to_ne_bytes)
            .collect()
    }

    /// Writes the single file of checkpoint 7 under `base`; its directory.
    fn write_grid(base: &Path) -> PathBuf {
        let place = SingleFile {
            dir: base.to_path_buf(),
            prefix: "grid".into(),
            keep: false,
        };
        let results = LocalComm::run(3, 1, |comm| {
            let (first, end) = band(comm.rank() as u64, 3);
            let memory = bytes_of(first, end);
            let vars = BTreeMap::from([(1u32, (&memory[..], 8usize))]);
            write(&comm, &place, 7, &datasets(first, end), &vars).map_err(|f| f.message)
        });
        for r in results {
            r.expect("no panic").expect("written");
        }
        base.join(dir_name("grid", 7))
    }

    /// What reader `r` of 2 recovers: its rows, or the failure.
    fn read_band(dir: &Path, r: u64) -> Result<Vec<u8>, Failure> {
        let found = Found {
            dir: dir.to_path_buf(),
            table: read_table(dir).map_err(Failure::no_recovery)?,
        };
        let (first, end) = band(r, 2);
        let d = datasets(first, end);
        let mut memory = vec![0u8; ((end - first) * COLS * 8) as usize];
        found.read(1, &d.subsets[&1], &mut memory, 8)?;
        Ok(memory)
    }

    fn flip(path: &Path, at: u64) {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        let mut b = [0u8];
        f.read_exact_at(&mut b, at).unwrap();
        f.write_all_at(&[b[0] ^ 0x10], at).unwrap();
    }

    #[test]
    fn every_block_is_summed_and_read_back_whole_on_other_ranks() {
        let base = tempfile::tempdir().unwrap();
        let dir = write_grid(base.path());
        assert_eq!(
            std::fs::metadata(dir.join("dataset-0.crc")).unwrap().len(),
            4 * 4
        );
        for r in 0..2 {
            let (first, end) = band(r, 2);
            assert_eq!(read_band(&dir, r).unwrap(), bytes_of(first, end));
        }
    }

    /// A byte flipped in each block of the data, and in each sum, in turn:
    /// exactly the readers whose rows touch that block fail, with
    /// `FTI_NREC` naming the file; the others read their rows right.
    #[test]
    fn a_flipped_byte_in_any_block_or_sum_fails_exactly_the_readers_of_that_block() {
        let base = tempfile::tempdir().unwrap();
        let dir = write_grid(base.path());
        let touches = |r: u64, block: u64| {
            let (first, end) = band(r, 2);
            let (lo, hi) = (first * COLS * 8, end * COLS * 8);
            let (b0, b1) = (block * blocks::BLOCK, (block + 1) * blocks::BLOCK);
            lo < b1 && b0 < hi
        };
        for (file, stride) in [("dataset-0.bin", blocks::BLOCK), ("dataset-0.crc", 4)] {
            for block in 0..4 {
                let at = block * stride + stride / 2;
                flip(&dir.join(file), at);
                for r in 0..2 {
                    match read_band(&dir, r) {
                        Ok(rows) => {
                            assert!(!touches(r, block), "{file} block {block}: reader {r}");
                            let (first, end) = band(r, 2);
                            assert_eq!(rows, bytes_of(first, end));
                        }
                        Err(f) => {
                            assert!(touches(r, block), "{file} block {block}: {}", f.message);
                            assert_eq!(f.code, FTI_NREC);
                            assert!(
                                f.message.contains("dataset-0.bin")
                                    && f.message.contains("checksum"),
                                "{}",
                                f.message
                            );
                        }
                    }
                }
                flip(&dir.join(file), at);
            }
        }
    }

    /// A data or sums file of another length than the table says is
    /// refused before anything is read.
    #[test]
    fn a_truncated_file_or_sums_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let dir = write_grid(base.path());
        for (file, len) in [("dataset-0.bin", 239_999), ("dataset-0.crc", 12)] {
            let path = dir.join(file);
            let keep = std::fs::read(&path).unwrap();
            let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            f.set_len(len).unwrap();
            let err = read_band(&dir, 0).unwrap_err();
            assert_eq!(err.code, FTI_NREC);
            assert!(err.message.contains(file), "{}", err.message);
            std::fs::write(&path, keep).unwrap();
        }
        assert!(read_band(&dir, 0).is_ok());
    }
}
