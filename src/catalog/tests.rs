//! Reading one checkpoint directory of a level.

use super::*;
use crate::level::commit::{Commit, COMMITTED};
use crate::topology::{Layout, Rule, Topology};
use std::os::unix::fs::PermissionsExt;

#[test]
fn a_marker_that_holds_the_layout_of_thousands_of_ranks_reads_as_committed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(crate::level::names::ckpt_dir(7));
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    // 4096 ranks on nodes of 4: the placement alone takes some 16 KB.
    let commit = Commit {
        job_id: "job".into(),
        checkpoint_id: 7,
        level: 2,
        stamp: 1,
        layout: Some(Layout::new(
            &Topology::new((0..4096).map(|r| r / 4).collect()).unwrap(),
            Rule::new("partner", [("copies", 1)]),
        )),
    };
    let bytes = serde_json::to_vec(&commit).unwrap();
    assert!(bytes.len() > 4096, "{} bytes", bytes.len());
    std::fs::write(dir.join(COMMITTED), &bytes).unwrap();
    let owner = rustix::process::getuid().as_raw();
    let read = read_ckpt_dir(&dir, 7, owner);
    assert_eq!(read.error, None);
    assert!(read.committed, "a sound marker of {} bytes", bytes.len());
}
