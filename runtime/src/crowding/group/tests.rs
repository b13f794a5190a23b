use super::*;

const MOUNTS: &str = "\
25 30 0:22 / /sys rw,nosuid - sysfs sysfs rw
33 25 0:28 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 25 0:29 /job /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
40 25 0:35 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

#[test]
fn finds_the_cpu_hierarchy_by_its_own_controller_not_a_prefix() {
    let v1 = mount_of(MOUNTS, |t, o| {
        t == "cgroup" && o.split(',').any(|o| o == "cpu")
    });
    assert_eq!(
        v1,
        Some((PathBuf::from("/job"), PathBuf::from("/sys/fs/cgroup/cpu")))
    );
    let v2 = mount_of(MOUNTS, |t, _| t == "cgroup2");
    assert_eq!(
        v2,
        Some((PathBuf::from("/"), PathBuf::from("/sys/fs/cgroup/unified")))
    );
    assert_eq!(mount_of(MOUNTS, |t, _| t == "none"), None);
}

#[test]
fn a_group_outside_the_mounted_part_of_its_hierarchy_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("a")).unwrap();
    let mount = (PathBuf::from("/job"), dir.path().to_path_buf());
    assert_eq!(within(&mount, "/job/a"), Some(dir.path().join("a")));
    assert_eq!(within(&mount, "/job"), Some(dir.path().to_path_buf()));
    // Not under the mount's root, or not there.
    assert_eq!(within(&mount, "/other/a"), None);
    assert_eq!(within(&mount, "/job/b"), None);
}

#[test]
fn the_sweep_removes_empty_groups_of_gone_roots_only() {
    let dir = tempfile::tempdir().unwrap();
    // A pid no process has (past the kernel's largest).
    let gone = dir.path().join("frame-2147483647");
    let mine = dir.path().join(format!("frame-{}", std::process::id()));
    let full = dir.path().join("frame-2147483646");
    let other = dir.path().join("someone-else-1");
    for d in [&gone, &mine, &full, &other] {
        std::fs::create_dir(d).unwrap();
    }
    // A group still holding something stays (as a populated group would).
    std::fs::write(full.join("cgroup.procs"), "1\n").unwrap();
    sweep(dir.path());
    assert!(!gone.exists());
    assert!(mine.exists() && full.exists() && other.exists());
}

#[test]
fn a_group_path_with_a_nul_byte_is_refused() {
    use std::os::unix::ffi::OsStrExt;
    let path = Path::new(std::ffi::OsStr::from_bytes(b"/sys/a\0b"));
    assert!(GroupEntry::new(path).is_err());
}
