use super::{lower, parse_list};

/// A CPU directory with `cpus` whose governors are `had`.
fn cpu_dir(had: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (cpu, governor) in had.iter().enumerate() {
        let d = dir.path().join(format!("cpu{cpu}/cpufreq"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("scaling_governor"), format!("{governor}\n")).unwrap();
    }
    dir
}

fn governor(dir: &tempfile::TempDir, cpu: usize) -> String {
    let path = dir
        .path()
        .join(format!("cpu{cpu}/cpufreq/scaling_governor"));
    std::fs::read_to_string(path).unwrap().trim().to_string()
}

/// The governor is set on the CPUs named only, and each gets back its own
/// when the recovery ends.
#[test]
fn the_governor_is_set_on_the_nodes_cpus_and_put_back() {
    let dir = cpu_dir(&["performance", "schedutil", "performance"]);
    let lowered = lower(dir.path(), &[0, 1], "powersave").unwrap();
    assert_eq!(lowered.files(), 2);
    assert_eq!(governor(&dir, 0), "powersave");
    assert_eq!(governor(&dir, 1), "powersave");
    assert_eq!(governor(&dir, 2), "performance");
    drop(lowered);
    assert_eq!(governor(&dir, 0), "performance");
    assert_eq!(governor(&dir, 1), "schedutil");
}

/// Without cpufreq for one CPU, nothing stays changed, and the reason
/// names the missing file.
#[test]
fn without_cpufreq_nothing_is_changed_and_the_reason_says_so() {
    let dir = cpu_dir(&["performance"]);
    let why = lower(dir.path(), &[0, 1], "powersave").unwrap_err();
    assert!(why.contains("no cpufreq interface"), "{why}");
    assert!(why.contains("cpu1/cpufreq/scaling_governor"), "{why}");
    assert_eq!(governor(&dir, 0), "performance");
}

#[test]
fn cpu_lists_parse_as_the_kernel_writes_them() {
    assert_eq!(parse_list("0-3,8"), Some(vec![0, 1, 2, 3, 8]));
    assert_eq!(parse_list("1"), Some(vec![1]));
    assert_eq!(parse_list(""), Some(vec![]));
    assert_eq!(parse_list("3-1"), None);
    assert_eq!(parse_list("0-99999999"), None);
    assert_eq!(parse_list("x"), None);
}
