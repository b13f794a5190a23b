use super::*;
use std::os::unix::fs::PermissionsExt;

#[test]
fn a_value_is_saved_privately_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub").join("index.json");
    assert_eq!(load::<Vec<u32>>(&path, 1024), Ok(Vec::new()));
    save(&path, &vec![1u32, 2]).unwrap();
    assert_eq!(load::<Vec<u32>>(&path, 1024), Ok(vec![1, 2]));
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn a_corrupt_large_or_linked_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.json");
    std::fs::write(&path, b"[1,").unwrap();
    assert!(load::<Vec<u32>>(&path, 1024)
        .unwrap_err()
        .contains("index.json"));
    std::fs::write(&path, b"[1, 2, 3]").unwrap();
    assert!(load::<Vec<u32>>(&path, 4)
        .unwrap_err()
        .contains("larger than"));
    std::fs::remove_file(&path).unwrap();
    let target = dir.path().join("elsewhere.json");
    save(&target, &vec![1u32]).unwrap();
    std::os::unix::fs::symlink(&target, &path).unwrap();
    assert!(load::<Vec<u32>>(&path, 1024).is_err());
}
