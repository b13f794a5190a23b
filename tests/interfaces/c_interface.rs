//! The C interface from C: `examples/c/heat2d.c` built with the system's C
//! compiler against libframe and run under `frame run` without a failure,
//! with a rank killed, and with a node killed (recovered from its partner
//! copies), always to the same checksum; and `tests/c/bad_args.c`, whose
//! bad arguments and calls out of order must each return their error code
//! with a message.

use crate::common;

use common::{compile_c as compile, frame_run_with, run, scratch, serial, CHILD_DEADLINE};
use std::path::Path;
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn checksum(out: &str) -> String {
    common::final_checksum(out)
}

#[test]
fn the_c_heat2d_survives_a_rank_and_a_node_failure_with_the_same_checksum() {
    let _g = serial();
    let bin = scratch();
    let exe = bin.path().join("heat2d_c");
    compile("examples/c/heat2d.c", &exe);
    let args = ["--nx", "96", "--ny", "80", "--steps", "400"];
    let job = |extra: &[&str], env: &[(&str, Option<&str>)]| {
        let dir = scratch();
        let global = dir.path().join("global");
        let mut all = vec![
            ("FRAME_SNAPSHOT_INTERVAL", Some("50")),
            ("FRAME_CONFIG", None),
        ];
        let g = global.to_str().expect("utf-8 path").to_string();
        let mut env = env.to_vec();
        env.push(("FRAME_STORAGE_GLOBAL_DIR", Some(g.as_str())));
        all.extend(env);
        let mut launch = vec!["--nodes", "2", "--ranks-per-node", "2"];
        launch.extend(extra);
        let job = frame_run_with(dir.path(), &launch, &exe, &args, &all);
        assert!(job.status.success(), "{}", job.out);
        job
    };
    let fault_free = job(&[], &[]);
    assert!(
        fault_free.out.contains("rows: 96, hottest interior cell: "),
        "{}",
        fault_free.out
    );
    let reference = checksum(&fault_free.out);
    // The same grid on one rank, the program started on its own.
    let dir = scratch();
    let (status, out, err) = run(
        Command::new(&exe)
            .args(args)
            .env("FRAME_STORAGE_LOCAL_DIR", dir.path())
            .env_remove("FRAME_CONFIG"),
        CHILD_DEADLINE,
    );
    assert!(status.success(), "{out}{err}");
    assert_eq!(checksum(&out), reference, "one rank and four differ");
    // A rank killed: recovered from level 1.
    let killed = job(&["--inject", "rank:2@iter=275"], &[]);
    assert!(
        killed
            .out
            .contains("state 1 (1 failed rank(s), first 2); recovered step 250"),
        "{}",
        killed.out
    );
    assert_eq!(checksum(&killed.out), reference, "{}", killed.out);
    // A node killed: its ranks restart on the spare and fetch their
    // partner copies.
    let node = job(
        &["--spare-nodes", "1", "--inject", "node:1@iter=275"],
        &[("FRAME_L2_INTERVAL", Some("1"))],
    );
    assert!(node.out.contains("node 1 died"), "{}", node.out);
    assert!(node.out.contains("recovered step"), "{}", node.out);
    assert_eq!(checksum(&node.out), reference, "{}", node.out);
}

#[test]
fn bad_arguments_from_c_return_error_codes_with_messages() {
    let _g = serial();
    let dir = scratch();
    let exe = dir.path().join("bad_args");
    compile("tests/c/bad_args.c", &exe);
    let (status, out, err) = run(
        Command::new(&exe)
            .env("FRAME_STORAGE_LOCAL_DIR", dir.path().join("local"))
            .env("FRAME_RETENTION_KEEP_ON_FINALIZE", "true")
            .env_remove("FRAME_CONFIG"),
        CHILD_DEADLINE,
    );
    assert!(status.success(), "{out}{err}");
    assert!(out.contains("0 failure(s)"), "{out}");
    // Every case ran (a crash would cut the list short): one line per
    // `expect(` call in the source.
    let source =
        std::fs::read_to_string(Path::new(ROOT).join("tests/c/bad_args.c")).expect("source");
    let cases = source.matches("expect(\"").count();
    assert_eq!(
        out.lines().filter(|l| l.starts_with("ok ")).count(),
        cases,
        "{out}"
    );
}

/// `make -C ffi install` puts the libraries, the header and `frame.pc`
/// under a prefix; a program builds from `pkg-config` alone, shared or
/// static (the static one still runs once the shared library is gone), and
/// both compute what the build against the tree computes.
#[test]
fn make_install_and_pkg_config_build_shared_and_static_programs() {
    let _g = serial();
    let prefix = scratch();
    common::make_install(prefix.path(), &["FTI=no"]);
    let pc_dir = prefix.path().join("lib/pkgconfig");
    let pkg = |args: &[&str]| -> Vec<String> {
        let (status, out, err) = run(
            Command::new("pkg-config")
                .args(args)
                .arg("frame")
                .env("PKG_CONFIG_PATH", &pc_dir),
            CHILD_DEADLINE,
        );
        assert!(status.success(), "pkg-config {args:?}: {err}");
        out.split_whitespace().map(String::from).collect()
    };
    let source = Path::new(ROOT).join("examples/c/heat2d.c");
    let shared = prefix.path().join("heat2d_shared");
    let static_exe = prefix.path().join("heat2d_static");
    let mut cc = Command::new("cc");
    cc.arg(&source)
        .args(pkg(&["--cflags", "--libs"]))
        .arg(format!(
            "-Wl,-rpath,{}",
            prefix.path().join("lib").display()
        ))
        .arg("-o")
        .arg(&shared);
    let (status, out, err) = run(&mut cc, CHILD_DEADLINE);
    assert!(status.success(), "shared build:\n{out}{err}");
    let private: Vec<String> = pkg(&["--static", "--libs"])
        .into_iter()
        .filter(|f| f != "-lframe")
        .collect();
    let mut cc = Command::new("cc");
    cc.arg(&source)
        .args(pkg(&["--cflags"]))
        .arg(prefix.path().join("lib/libframe.a"))
        .args(private)
        .arg("-o")
        .arg(&static_exe);
    let (status, out, err) = run(&mut cc, CHILD_DEADLINE);
    assert!(status.success(), "static build:\n{out}{err}");
    let tree = prefix.path().join("heat2d_tree");
    compile("examples/c/heat2d.c", &tree);
    let sum = |exe: &Path| {
        let dir = scratch();
        let (status, out, err) = run(
            Command::new(exe)
                .args(["--nx", "40", "--ny", "30", "--steps", "60"])
                .env("FRAME_STORAGE_LOCAL_DIR", dir.path())
                .env_remove("FRAME_CONFIG"),
            CHILD_DEADLINE,
        );
        assert!(status.success(), "{}: {out}{err}", exe.display());
        checksum(&out)
    };
    let reference = sum(&tree);
    assert_eq!(sum(&shared), reference);
    std::fs::remove_file(prefix.path().join("lib/libframe.so")).expect("remove the shared library");
    assert_eq!(sum(&static_exe), reference);
}
