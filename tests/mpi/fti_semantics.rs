//! FTI's semantics where programs depend on them, on frame's libfti
//! (`--features mpi`): `tests/c/fti_semantics.c` under `mpiexec`, 8 ranks
//! as 4 virtual nodes, one behaviour per mode; restarts from each level
//! (node directories removed so that only that level can serve).

use crate::common;

use common::mpirun::{mpiexec, MpiJob};
use common::{fti, scratch, serial};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn program() -> &'static PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| fti::compile("tests/c/fti_semantics.c", "fti_semantics"))
}

fn semantics(dir: &Path, config: &Path, mode: &str, level: u32) -> MpiJob {
    let config = config.to_str().unwrap();
    mpiexec(dir, 8, program(), &[config, mode, &level.to_string()], &[])
}

/// The configuration of [`fti::config`] in `dir` with `from` replaced by
/// `to`.
fn config_with(dir: &Path, from: &str, to: &str) -> PathBuf {
    let config = fti::config(dir, 0, 2, 1);
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains(from), "{from} is not in the configuration");
    std::fs::write(&config, text.replacen(from, to, 1)).unwrap();
    config
}

/// Asserts that `job` passed every check of `mode` and ended with `done`.
fn passed(job: &MpiJob, mode: &str, done: &str) {
    assert!(!job.out.contains("FAIL"), "{mode}:\n{}", job.out);
    assert!(
        job.out.contains(&format!("semantics {mode}: {done}")),
        "{mode}:\n{}",
        job.out
    );
}

/// Removes what only a higher level survives: FTI_Checkpoint(id, level)
/// keeps the checkpoint at level 1 and at `level` (FTI's own intervals,
/// minutes, are not due), so losing node 1 leaves `level` alone to serve
/// its ranks.
fn lose_for(dir: &Path, level: u32) {
    if level > 1 {
        let node = dir.join("local").join("node-1");
        std::fs::remove_dir_all(node).expect("remove node 1");
    }
}

/// Checkpoints at `level`, is killed, loses what only `level` survives,
/// and runs `mode`'s restart.
fn killed_and_restarted(mode: &str, level: u32) {
    let dir = scratch();
    let config = fti::config(dir.path(), 0, 2, 1);
    let first = semantics(dir.path(), &config, mode, level);
    assert!(
        !first.status.success(),
        "{mode}: not killed:\n{}",
        first.out
    );
    passed(&first, mode, "first run done");
    lose_for(dir.path(), level);
    let second = semantics(dir.path(), &config, mode, level);
    assert!(
        second.status.success(),
        "{mode} at L{level}:\n{}",
        second.out
    );
    passed(&second, mode, "all checks passed");
    if level > 1 {
        let fetched = second
            .out
            .lines()
            .find(|l| l.contains("checkpoint brought back to level 1"));
        assert!(
            fetched.is_some_and(|l| l.ends_with(&format!("level=L{level}"))),
            "{mode}: expected a restart from L{level}:\n{}",
            second.out
        );
    }
}

/// FTI_Recover on some ranks, FTI_RecoverVar on the others: under FTI
/// neither waits for the other (a restart from every level).
#[test]
fn ranks_recover_some_whole_some_variable_by_variable_at_every_level() {
    let _serial = serial();
    for level in 1..=4 {
        killed_and_restarted("mixed", level);
    }
}

/// A variable protected too small fails to recover; FTI_Realloc sizes it
/// and FTI_RecoverVar is tried again.
#[test]
fn a_failed_recover_var_is_retried_after_fti_realloc() {
    let _serial = serial();
    killed_and_restarted("retry", 1);
    killed_and_restarted("retry", 2);
}

/// FTI_Checkpoint takes any id, 0 included.
#[test]
fn checkpoint_id_zero_is_a_checkpoint() {
    let _serial = serial();
    killed_and_restarted("id0", 1);
}

/// FTI_Recover within a run loads the newest checkpoint of the run, on the
/// ranks that call it (checkpoints at level 1, and at FTI_L4_DCP, written
/// as level 4).
#[test]
fn fti_recover_rolls_back_within_a_run() {
    let _serial = serial();
    for level in [1, 8] {
        let dir = scratch();
        let config = fti::config(dir.path(), 0, 2, 1);
        let job = semantics(dir.path(), &config, "rollback", level);
        assert!(job.status.success(), "L{level}:\n{}", job.out);
        passed(&job, "rollback", "all checks passed");
    }
}

/// FTI_Init called again without FTI_Finalize starts a new session, which
/// finds the first one's checkpoint.
#[test]
fn fti_init_again_starts_a_session_that_finds_the_checkpoints() {
    let _serial = serial();
    let dir = scratch();
    let config = fti::config(dir.path(), 0, 2, 1);
    let job = semantics(dir.path(), &config, "reinit", 2);
    assert!(job.status.success(), "{}", job.out);
    passed(&job, "reinit", "all checks passed");
}

/// A configuration file as FTI's tools and editors write it: a UTF-8
/// byte-order mark first, and keys FTI reads that its template leaves out.
/// The program runs with the file's settings (its checkpoints in its
/// `ckpt_dir`) and no warning about FTI's own keys.
#[test]
fn a_configuration_with_a_byte_order_mark_and_all_of_ftis_keys() {
    let _serial = serial();
    let dir = scratch();
    let config = fti::config(dir.path(), 0, 2, 1);
    let text = std::fs::read_to_string(&config).unwrap();
    let text = text.replacen(
        "[Restart]",
        "Dcp_stack_size = 5\nH5_single_file_enable = 0\nH5_single_file_inline = 1\n\
         H5_single_file_keep = 0\nKeep_heads_alive = 0\nMax_var_id = 102400\n[Restart]",
        1,
    );
    std::fs::write(&config, format!("\u{feff}{text}")).unwrap();
    let job = semantics(dir.path(), &config, "rollback", 1);
    assert!(job.status.success(), "{}", job.out);
    passed(&job, "rollback", "all checks passed");
    assert!(!job.out.contains("warning"), "{}", job.out);
    // Finalized: the job's files are gone, its directories remain.
    assert!(
        dir.path().join("local").join("node-0").is_dir(),
        "ckpt_dir was not used:\n{}",
        job.out
    );
}

/// `keep_last_ckpt = 1`: FTI_Finalize keeps the last checkpoint in the
/// global directory and clears the nodes' storage; the next run, on nodes
/// whose storage was wiped, restarts from it (checkpoints written at level
/// 1 only, and at level 2).
#[test]
fn keep_last_ckpt_survives_wiped_node_storage() {
    let _serial = serial();
    for level in [1, 2] {
        let dir = scratch();
        let config = config_with(dir.path(), "Keep_last_ckpt = 0", "Keep_last_ckpt = 1");
        let first = semantics(dir.path(), &config, "keep", level);
        assert!(first.status.success(), "L{level}:\n{}", first.out);
        passed(&first, "keep", "first run done");
        let local = dir.path().join("local");
        let left: Vec<_> = common::files_under(&local)
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "fck"))
            .collect();
        assert!(left.is_empty(), "L{level}: node-local files left: {left:?}");
        std::fs::remove_dir_all(&local).unwrap();
        let second = semantics(dir.path(), &config, "keep", level);
        assert!(second.status.success(), "L{level}:\n{}", second.out);
        passed(&second, "keep", "all checks passed");
        assert!(
            second.out.lines().any(
                |l| l.contains("checkpoint brought back to level 1") && l.ends_with("level=L4")
            ),
            "L{level}: not restarted from level 4:\n{}",
            second.out
        );
    }
}

/// `[restart] failure` and `exec_id` as FTI writes them into the
/// configuration: at FTI_Init (the execution), 1 after the first
/// checkpoint (so the same command restarts), 0 at FTI_Finalize. A run
/// the user sets back to `failure = 0` starts a new execution and says it
/// keeps the older one's checkpoints, which a later restart of that
/// execution still finds.
#[test]
fn restart_keys_are_written_back_as_fti_writes_them() {
    let _serial = serial();
    let dir = scratch();
    let config = fti::config(dir.path(), 0, 2, 1);
    let keys = || {
        let text = std::fs::read_to_string(&config).unwrap();
        let value = |key: &str| {
            text.lines()
                .find_map(|l| {
                    let (k, v) = l.split_once('=')?;
                    (k.trim().eq_ignore_ascii_case(key)).then(|| v.trim().to_string())
                })
                .unwrap_or_default()
        };
        (value("failure"), value("exec_id"))
    };
    let first = semantics(dir.path(), &config, "mixed", 1);
    assert!(!first.status.success(), "{}", first.out);
    let (failure, a) = keys();
    assert_eq!(failure, "1", "after a checkpoint and a crash");
    assert!(a.len() >= 19, "exec_id {a:?}");
    // The user asks for a new execution: it does not restart, and says
    // where execution A's checkpoints are kept.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace("Failure = 1", "Failure = 0")).unwrap();
    let second = semantics(dir.path(), &config, "mixed", 1);
    assert!(!second.status.success(), "{}", second.out);
    passed(&second, "mixed", "first run done");
    assert!(
        second
            .out
            .contains(&format!("the checkpoints of execution {a} are kept")),
        "{}",
        second.out
    );
    let (failure, b) = keys();
    assert_eq!(failure, "1");
    assert_ne!(a, b, "a new execution");
    // Back to execution A: its checkpoint is still there.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace(&b, &a)).unwrap();
    let third = semantics(dir.path(), &config, "mixed", 1);
    assert!(third.status.success(), "{}", third.out);
    passed(&third, "mixed", "all checks passed");
    assert_eq!(keys(), ("0".to_string(), a), "after FTI_Finalize");
}

/// `enable_staging = 1`: each rank writes a file in its node's stage
/// directory and FTI_SendFile moves it to the global file system, whole:
/// within the call with `head = 0`, in the background with `head = 1`
/// (the program polls FTI_GetStageStatus); a move that fails leaves the
/// file.
#[test]
fn staged_files_reach_the_global_file_system() {
    let _serial = serial();
    for head in [0, 1] {
        let dir = scratch();
        let config = fti::config(dir.path(), head, 2, 1);
        let text = std::fs::read_to_string(&config).unwrap();
        std::fs::write(
            &config,
            text.replacen("[Restart]", "Enable_staging = 1\n[Restart]", 1),
        )
        .unwrap();
        let remote = dir.path().join("global").join("staged");
        std::fs::create_dir_all(&remote).unwrap();
        let args = [
            config.to_str().unwrap(),
            "stage",
            "1",
            remote.to_str().unwrap(),
            if head == 1 { "background" } else { "inline" },
        ];
        let job = mpiexec(dir.path(), 8, program(), &args, &[]);
        assert!(job.status.success(), "head = {head}:\n{}", job.out);
        passed(&job, "stage", "all checks passed");
        // With head = 1 the first rank of each node is its manager.
        let ranks = if head == 1 { 4 } else { 8 };
        for rank in 0..ranks {
            let bytes = std::fs::read(remote.join(format!("staged-{rank}.bin"))).unwrap();
            assert_eq!(bytes.len(), 3 << 20, "head = {head}, rank {rank}");
            let whole = bytes
                .chunks(4)
                .enumerate()
                .all(|(i, w)| i32::from_ne_bytes(w.try_into().unwrap()) == (i as i32 ^ rank));
            assert!(whole, "head = {head}: rank {rank}'s staged file differs");
        }
        assert!(
            !remote.join(format!("staged-{ranks}.bin")).exists(),
            "head = {head}"
        );
    }
}

/// `tests/c/fti_dcp.c`, built once.
fn dcp_program() -> &'static PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| fti::compile("tests/c/fti_dcp.c", "fti_dcp"))
}

/// FTI's dCP settings: 4 KiB blocks, up to 8 layers.
fn dcp_config(dir: &Path) -> PathBuf {
    config_with(
        dir,
        "Keep_last_ckpt = 0",
        "Keep_last_ckpt = 0\nEnable_dcp = 1\nDcp_mode = 1\nDcp_block_size = 4096\nDcp_stack_size = 8",
    )
}

/// Writes five differential checkpoints (a tenth of the blocks changed in
/// each) and is killed; returns rank 3's level-4 chunk directory.
fn dcp_written(dir: &Path, config: &Path) -> PathBuf {
    let config = config.to_str().unwrap();
    let first = mpiexec(dir, 8, dcp_program(), &[config, "write"], &[]);
    assert!(!first.status.success(), "not killed:\n{}", first.out);
    assert!(!first.out.contains("FAIL"), "{}", first.out);
    assert!(first.out.contains("dcp: written"), "{}", first.out);
    fti::resolve(&dir.join("global"), "fti-*/l4/chunks/rank-000003")
}

/// The files of a rank's level-4 chunk directory and their sizes.
fn packs_in(chunks: &Path) -> Vec<(PathBuf, u64)> {
    std::fs::read_dir(chunks)
        .unwrap()
        .flatten()
        .map(|e| (e.path(), e.metadata().unwrap().len()))
        .collect()
}

/// `enable_dcp = 1` with `FTI_L4_DCP`: each checkpoint after the first
/// writes only the blocks that changed (a tenth), into a pack of its own;
/// after every node's storage is lost the newest recovers from level 4 bit
/// for bit, assembled from blocks of five checkpoints. A block damaged in
/// the global file system is found: the restart is refused with
/// `FTI_NREC` and nothing is deleted.
#[test]
fn differential_checkpoints_recover_bit_exact_and_a_damaged_block_is_found() {
    let _serial = serial();
    let dir = scratch();
    let config = dcp_config(dir.path());
    let chunks = dcp_written(dir.path(), &config);
    let packs = packs_in(&chunks);
    let full = packs.iter().map(|(_, len)| *len).max().unwrap();
    let added: u64 = packs.iter().map(|(_, len)| *len).sum::<u64>() - full;
    // Versions 2 to 5 changed about 26 of 256 blocks each.
    assert!(
        packs.len() == 5 && added < full / 2,
        "{} bytes in {} packs besides a full one of {full}",
        added,
        packs.len()
    );
    std::fs::remove_dir_all(dir.path().join("local")).unwrap();
    let config_text = config.to_str().unwrap();
    let again = mpiexec(dir.path(), 8, dcp_program(), &[config_text, "recover"], &[]);
    assert!(again.status.success(), "{}", again.out);
    assert!(!again.out.contains("FAIL"), "{}", again.out);
    assert!(
        again.out.contains("dcp: recovered bit-exact"),
        "{}",
        again.out
    );
    assert!(
        again
            .out
            .lines()
            .any(|l| l.contains("checkpoint brought back to level 1") && l.ends_with("level=L4")),
        "not restarted from level 4:\n{}",
        again.out
    );

    // The same, with a byte flipped near the end of rank 3's full layer,
    // in blocks no later version changed.
    let dir = scratch();
    let config = dcp_config(dir.path());
    let chunks = dcp_written(dir.path(), &config);
    std::fs::remove_dir_all(dir.path().join("local")).unwrap();
    let (pack, len) = packs_in(&chunks)
        .into_iter()
        .max_by_key(|(_, len)| *len)
        .unwrap();
    let mut bytes = std::fs::read(&pack).unwrap();
    bytes[len as usize - 6000] ^= 0x20;
    std::fs::write(&pack, &bytes).unwrap();
    let before = common::file_hashes(&dir.path().join("global"));
    let refused = mpiexec(
        dir.path(),
        8,
        dcp_program(),
        &[config.to_str().unwrap(), "recover"],
        &[],
    );
    assert!(!refused.status.success(), "{}", refused.out);
    assert!(
        refused.out.contains("FTI_Init returned -2"),
        "{}",
        refused.out
    );
    let name = pack.file_name().unwrap().to_string_lossy();
    assert!(
        refused.out.contains("does not match its hash") && refused.out.contains(&*name),
        "the damaged block is not named:\n{}",
        refused.out
    );
    let after = common::file_hashes(&dir.path().join("global"));
    for file in &before {
        assert!(after.contains(file), "{file:?} is gone or changed");
    }
}

/// `tests/c/fti_vpr.c`, built once.
fn vpr_program() -> &'static PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| fti::compile("tests/c/fti_vpr.c", "fti_vpr"))
}

/// Sets `[restart] failure` in the configuration at `path` (the runs write
/// it back as FTI does).
fn set_failure(path: &Path, failure: u32) {
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            if l.trim_start().to_ascii_lowercase().starts_with("failure") {
                format!("failure = {failure}")
            } else {
                l.to_string()
            }
        })
        .collect();
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// Global data sets and the single file: a grid of 50 x 30 doubles split
/// by rows over 8 ranks is checkpointed twice at `FTI_L4_H5_SINGLE` and
/// the job killed; with `[restart] failure = 3` it recovers on 6 ranks and
/// on 4, each taking other rows than any writer had, bit for bit. Only the
/// newest single file is kept; a flipped byte in it fails the restart
/// naming the file; without one, `FTI_Init` says where it looked.
#[test]
fn a_checkpoint_of_8_ranks_recovers_on_6_and_on_4_from_its_single_file() {
    let _serial = serial();
    let dir = scratch();
    let config = config_with(
        dir.path(),
        "Keep_last_ckpt = 0",
        "Keep_last_ckpt = 0\nH5_single_file_enable = 1\nH5_single_file_prefix = grid",
    );
    let args = |mode: &'static str| {
        [
            config.to_str().unwrap().to_string(),
            mode.into(),
            "50".into(),
            "30".into(),
        ]
    };
    let run = |ranks: usize, mode: &'static str| {
        let a = args(mode);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        mpiexec(dir.path(), ranks, vpr_program(), &a, &[])
    };
    let written = run(8, "write");
    assert!(!written.status.success(), "not killed:\n{}", written.out);
    assert!(!written.out.contains("FAIL"), "{}", written.out);
    assert!(written.out.contains("vpr: written"), "{}", written.out);
    let global = dir.path().join("global");
    let singles: Vec<String> = std::fs::read_dir(&global)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("grid-ID"))
        .collect();
    assert_eq!(singles, vec!["grid-ID00000020.frame".to_string()]);
    for ranks in [6, 4] {
        set_failure(&config, 3);
        let again = run(ranks, "recover");
        assert!(again.status.success(), "{ranks} ranks:\n{}", again.out);
        assert!(!again.out.contains("FAIL"), "{ranks} ranks:\n{}", again.out);
        assert!(
            again
                .out
                .contains(&format!("vpr: recovered on {ranks} ranks")),
            "{}",
            again.out
        );
    }
    // A damaged byte of the grid: the restart says so and which file, and
    // the single file stays for when the byte is right again.
    let grid = global.join(&singles[0]).join("dataset-0.bin");
    let flip = |path: &Path| {
        let mut bytes = std::fs::read(path).unwrap();
        bytes[5_000] ^= 0x04;
        std::fs::write(path, bytes).unwrap();
    };
    flip(&grid);
    set_failure(&config, 3);
    let damaged = run(4, "recover");
    assert!(!damaged.status.success(), "{}", damaged.out);
    assert!(
        damaged.out.contains("FAIL: rank 1: FTI_Recover")
            && damaged.out.contains("dataset-0.bin")
            && damaged.out.contains("checksum"),
        "{}",
        damaged.out
    );
    flip(&grid);
    set_failure(&config, 3);
    let again = run(4, "recover");
    assert!(again.status.success(), "{}", again.out);
    std::fs::rename(global.join(&singles[0]), global.join("moved")).unwrap();
    set_failure(&config, 3);
    let none = run(4, "recover");
    assert!(!none.status.success(), "{}", none.out);
    assert!(
        none.out.contains("FTI_Init returned -2") && none.out.contains("no single file grid-ID"),
        "{}",
        none.out
    );
}

/// `FTI_GetConfig` after `FTI_Init`, three protected variables, a group and
/// `FTI_Checkpoint(7, 2)` on 4 ranks as 2 virtual nodes: every member
/// libfti declares holds what the configuration file says and where the
/// rank sits; before `FTI_Init` the answer is all zero.
#[test]
fn get_config_answers_with_the_file_the_topology_and_the_run_so_far() {
    let _serial = serial();
    let dir = scratch();
    let config = fti::config(dir.path(), 0, 2, 1);
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replacen(
            "Keep_last_ckpt = 0",
            "Keep_last_ckpt = 1\nKeep_l4_ckpt = 1",
            1,
        )
        .replacen("Inline_L3 = 1", "Inline_L3 = 0", 1)
        .replacen("Ckpt_L2 = 1", "Ckpt_L2 = 6", 1);
    std::fs::write(&config, text).unwrap();
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let program = BUILT.get_or_init(|| fti::compile("tests/c/fti_getconfig.c", "fti_getconfig"));
    let job = mpiexec(dir.path(), 4, program, &[config.to_str().unwrap()], &[]);
    assert!(job.status.success(), "{}", job.out);
    let (local, global) = (dir.path().join("local"), dir.path().join("global"));
    let mut ids = std::collections::BTreeSet::new();
    for rank in 0..4usize {
        let answer: std::collections::BTreeMap<&str, &str> = job
            .out
            .lines()
            .filter_map(|l| l.strip_prefix(&format!("{rank} ")))
            .filter_map(|l| l.split_once(' '))
            .collect();
        let node = (rank / 2).to_string();
        let place = (rank % 2).to_string();
        let rank_text = rank.to_string();
        let config_text = config.display().to_string();
        let local_text = local.display().to_string();
        let global_text = global.display().to_string();
        let expected: Vec<(&str, &str)> = vec![
            ("before.initSCES", "0"),
            ("ioMode", "1001"),
            ("verbosity", "2"),
            ("saveLastCkpt", "1"),
            ("keepL4Ckpt", "1"),
            ("dcpPosix", "0"),
            ("stagingEnabled", "0"),
            ("blockSize", "1024"),
            ("transferSize", "16"),
            ("test", "1"),
            ("cfgFile", &config_text),
            ("localDir", &local_text),
            ("glbalDir", &global_text),
            ("nbProc", "4"),
            ("nbNodes", "2"),
            ("myRank", &rank_text),
            ("splitRank", &rank_text),
            ("nodeSize", "2"),
            ("nbHeads", "0"),
            ("nbApprocs", "2"),
            ("groupSize", "4"),
            ("nodeID", &node),
            ("nodeRank", &place),
            ("amIaHead", "0"),
            ("L1.ckptIntv", "1"),
            ("L2.ckptIntv", "6"),
            ("L3.ckptIntv", "1"),
            ("L4.ckptIntv", "1"),
            ("L1.isInline", "1"),
            ("L2.isInline", "1"),
            ("L3.isInline", "0"),
            ("L4.isInline", "1"),
            ("L4.dir", &global_text),
            ("reco", "0"),
            ("ckptLvel", "2"),
            ("ckptId", "7"),
            ("ckptCnt", "1"),
            ("nbVar", "3"),
            ("nbGroup", "1"),
            ("initSCES", "1"),
        ];
        for (key, want) in expected {
            assert_eq!(
                answer.get(key).copied(),
                Some(want),
                "rank {rank}, {key}:\n{}",
                job.out
            );
        }
        for l in 1..=3 {
            let d = answer[format!("L{l}.dir").as_str()];
            assert!(d.starts_with(&local_text), "rank {rank}: L{l}.dir {d}");
        }
        ids.insert(answer["id"].to_string());
    }
    assert_eq!(ids.len(), 1, "one execution id: {ids:?}");
    assert!(!ids.iter().next().unwrap().is_empty());
}
