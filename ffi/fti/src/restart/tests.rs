use super::*;

const FILE: &str = "\
[Basic]
Head = 0 ; inline
Ckpt_dir = /tmp/l1

[Restart]
# set by FTI
Failure = 0     ; 1 after a failure
Exec_ID = XXXX-XX-XX_XX-XX-XX

[Advanced]
Local_test = 1
";

#[test]
fn the_keys_change_and_nothing_else() {
    let out = with_keys(FILE, 1, "2026-11-26_09-32-05");
    let expected = FILE
        .replace(
            "Failure = 0     ; 1 after a failure",
            "Failure = 1 ; 1 after a failure",
        )
        .replace(
            "Exec_ID = XXXX-XX-XX_XX-XX-XX",
            "Exec_ID = 2026-11-26_09-32-05",
        );
    assert_eq!(out, expected);
    // Setting the same values again changes nothing.
    assert_eq!(with_keys(&out, 1, "2026-11-26_09-32-05"), out);
}

#[test]
fn missing_keys_and_sections_are_added() {
    let no_exec = "[restart]\nfailure = 2\n[basic]\nhead = 0\n";
    assert_eq!(
        with_keys(no_exec, 0, "E"),
        "[restart]\nexec_id = E\nfailure = 0\n[basic]\nhead = 0\n"
    );
    let none = "\u{feff}[Basic]\nHead = 0";
    assert_eq!(
        with_keys(none, 1, "E"),
        "\u{feff}[Basic]\nHead = 0\n[restart]\nfailure = 1\nexec_id = E\n"
    );
    // Keys of the same name in other sections are not touched; CRLF files
    // keep their line endings.
    let crlf = "[Basic]\r\nfailure = 7\r\n[RESTART]\r\nFAILURE=0\r\n";
    assert_eq!(
        with_keys(crlf, 1, "E"),
        "[Basic]\r\nfailure = 7\r\n[RESTART]\r\nexec_id = E\r\nFAILURE = 1\r\n"
    );
}

#[test]
fn the_file_is_replaced_with_its_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("frame-fti-restart-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config.fti");
    std::fs::write(&path, FILE).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    write_keys(&path, 2, "X1").unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("Failure = 2") && text.contains("Exec_ID = X1"),
        "{text}"
    );
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        1,
        "a temporary file was left"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn exec_ids_are_ftis_format_and_fit_job_ids() {
    let id = new_exec_id();
    assert_eq!(id.len(), 19, "{id}");
    assert_eq!(id.as_bytes()[10], b'_', "{id}");
    assert_eq!(job_part(&id), id);
    assert_eq!(job_part("a b/c"), "a_b_c");
}
