use super::*;

fn index(entries: &[(u64, &str, i64)]) -> Index {
    let mut index = Index::default();
    for (id, name, version) in entries {
        index.add(Version {
            id: *id,
            name: name.to_string(),
            version: *version,
        });
    }
    index
}

#[test]
fn the_restart_test_answers_the_natural_checkpoint_when_it_fits() {
    let idx = index(&[
        (1, "heat", 19),
        (2, "heat", 39),
        (3, "other", 5),
        (4, "heat", 59),
    ]);
    assert_eq!(restart_test(&idx, Some(4), "heat", None), Ok(Some(59)));
    assert_eq!(restart_test(&idx, Some(4), "heat", Some(40)), Ok(Some(39)));
    // The newest of a name that is not the natural one, no newer than it.
    assert_eq!(restart_test(&idx, Some(3), "heat", None), Ok(Some(39)));
    assert_eq!(restart_test(&idx, Some(4), "other", None), Ok(Some(5)));
    assert_eq!(restart_test(&idx, Some(4), "none", None), Ok(None));
    assert_eq!(restart_test(&idx, None, "heat", None), Ok(Some(59)));
    // A checkpoint frame can restore that the index lost: never silent.
    let err = restart_test(&Index::default(), Some(4), "heat", None).unwrap_err();
    assert!(err.contains("checkpoint 4"), "{err}");
}

#[test]
fn a_version_written_again_replaces_the_older_one() {
    let mut idx = index(&[(1, "heat", 19), (2, "heat", 39)]);
    idx.add(Version {
        id: 3,
        name: "heat".into(),
        version: 19,
    });
    assert_eq!(idx.find("heat", 19).map(|v| v.id), Some(3));
    assert_eq!(idx.versions.len(), 2);
    idx.forget("heat");
    assert!(idx.versions.is_empty());
}

#[test]
fn the_index_is_saved_privately_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(Index::load(dir.path(), "a"), Ok(Index::default()));
    let idx = index(&[(1, "heat", 19)]);
    idx.save(dir.path(), "a").unwrap();
    assert_eq!(Index::load(dir.path(), "a"), Ok(idx));
    // Jobs sharing a directory keep indexes of their own.
    assert_eq!(Index::load(dir.path(), "b"), Ok(Index::default()));
    std::fs::write(Index::path(dir.path(), "a"), b"{").unwrap();
    assert!(Index::load(dir.path(), "a")
        .unwrap_err()
        .contains("frame-veloc-index-a.json"));
}
