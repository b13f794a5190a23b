use super::*;

fn index(ids: &[(u64, &str)]) -> Index {
    let mut index = Index::default();
    for (id, name) in ids {
        index.add(Dataset {
            id: *id,
            name: name.to_string(),
            flags: 1,
        });
    }
    index
}

#[test]
fn the_natural_checkpoint_is_kept_unless_a_name_or_a_failed_restart_says_otherwise() {
    let idx = index(&[(3, "a"), (4, "b"), (5, "c")]);
    assert_eq!(pick(&idx, Some(5), None, None), Ok(Pick::Natural));
    assert_eq!(pick(&idx, Some(5), Some("c"), None), Ok(Pick::Natural));
    assert_eq!(pick(&idx, Some(5), Some("a"), None), Ok(Pick::From(3)));
    assert_eq!(pick(&idx, Some(5), None, Some(5)), Ok(Pick::From(4)));
    assert_eq!(pick(&idx, Some(5), None, Some(3)), Ok(Pick::Nothing));
    assert_eq!(pick(&idx, None, None, None), Ok(Pick::Nothing));
    // Checkpoints without an index entry are frame's to find.
    assert_eq!(
        pick(&Index::default(), Some(7), None, None),
        Ok(Pick::Natural)
    );
    let err = pick(&idx, Some(5), Some("zz"), None).unwrap_err();
    assert!(err.contains("\"zz\"") && err.contains("a, b, c"), "{err}");
}

#[test]
fn a_dropped_checkpoint_is_never_picked() {
    let mut idx = index(&[(3, "a"), (4, "b"), (5, "c")]);
    assert_eq!(idx.drop_named("c"), Some(5));
    assert_eq!(idx.drop_named("c"), None);
    assert_eq!(pick(&idx, Some(5), None, None), Ok(Pick::From(4)));
    assert!(pick(&idx, Some(5), Some("c"), None).is_err());
    idx.drop_named("a");
    assert_eq!(pick(&idx, Some(4), None, Some(4)), Ok(Pick::Nothing));
}

#[test]
fn picks_survive_their_broadcast() {
    for p in [Pick::Natural, Pick::From(9), Pick::Nothing] {
        assert_eq!(Pick::decode(p.encode()), p);
    }
}

#[test]
fn the_index_is_saved_privately_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(Index::load(dir.path()), Ok(Index::default()));
    let idx = index(&[(1, "one"), (2, "two")]);
    idx.save(dir.path()).unwrap();
    assert_eq!(Index::load(dir.path()), Ok(idx));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(Index::path(dir.path()))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn a_corrupt_or_linked_index_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = Index::path(dir.path());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, b"{\"datasets\": [}").unwrap();
    let err = Index::load(dir.path()).unwrap_err();
    assert!(err.contains("frame-index.json"), "{err}");
    std::fs::remove_file(&path).unwrap();
    let target = dir.path().join("elsewhere");
    index(&[(1, "x")]).save(&target).unwrap();
    std::os::unix::fs::symlink(Index::path(&target), &path).unwrap();
    assert!(Index::load(dir.path()).is_err());
}
