//! The CMake packages `make -C ffi install` installs, used as HPC codes use
//! them: a C program's build finds libframe with `find_package(frame)`, and
//! an FTI program's build, written for FTI 1.6, finds libfti with
//! `find_package(FTI)` and links FTI's own target names unchanged, and an
//! SCR program's build finds libscr with `find_package(scr)` (or
//! `pkg-config scr`), and a VeloC program's with `find_package(veloc)`.
//! The programs they build compute what the ones built by hand compute,
//! and recover from a failure to the same checksum.

use crate::common;

use common::fti::{self, Heat};
use common::scr;
use common::veloc;
use common::{frame_run_with, run, scratch, serial, Job, CHILD_DEADLINE};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The prefix frame's libraries are installed into once per test binary,
/// with `make -C ffi install` in this test's profile.
fn installed() -> &'static Path {
    static PREFIX: OnceLock<PathBuf> = OnceLock::new();
    PREFIX.get_or_init(|| {
        common::need_tool("cmake");
        let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cmake-prefix");
        let _ = std::fs::remove_dir_all(&prefix);
        common::make_install(&prefix, &["FTI=yes", "SCR=yes", "VELOC=yes"]);
        for f in [
            "lib/cmake/frame/frameConfig.cmake",
            "lib/cmake/frame/frameConfigVersion.cmake",
            "share/FTI/cmake/FTIConfig.cmake",
            "share/FTI/cmake/FTIConfigVersion.cmake",
            "lib/libfti_f90.a",
            "include/fti.mod",
            "share/scr/cmake/scrConfig.cmake",
            "share/scr/cmake/scrConfigVersion.cmake",
            "lib/pkgconfig/scr.pc",
            "lib/libscr.so",
            "include/scr.h",
            "share/veloc/cmake/velocConfig.cmake",
            "lib/pkgconfig/veloc-client.pc",
            "lib/libveloc-client.so",
            "include/veloc/defs.h",
        ] {
            assert!(prefix.join(f).is_file(), "make -C ffi install left out {f}");
        }
        prefix
    })
}

/// Configures and builds the CMake project `tests/cmake/<project>` against
/// the installed prefix, with the `-D` definitions `defs`; returns its
/// build directory.
fn built(project: &str, defs: &[(&str, &str)]) -> PathBuf {
    let prefix = installed();
    let build = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cmake-build-{project}"));
    let _ = std::fs::remove_dir_all(&build);
    let mut configure = Command::new("cmake");
    configure
        .arg("-S")
        .arg(Path::new(ROOT).join("tests/cmake").join(project))
        .arg("-B")
        .arg(&build)
        .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display()));
    for (k, v) in defs {
        configure.arg(format!("-D{k}={}", Path::new(ROOT).join(v).display()));
    }
    let (status, out, err) = run(&mut configure, CHILD_DEADLINE);
    assert!(
        status.success(),
        "cmake could not configure {project}:\n{out}{err}"
    );
    let (status, out, err) = run(
        Command::new("cmake").arg("--build").arg(&build),
        CHILD_DEADLINE,
    );
    assert!(
        status.success(),
        "cmake could not build {project}:\n{out}{err}"
    );
    build
}

/// The C heat2d `exe` under `frame run` on 2 nodes of 2 ranks, with
/// `extra` launch arguments.
fn heat2d(exe: &Path, extra: &[&str]) -> Job {
    let dir = scratch();
    let mut launch = vec![
        "--nodes",
        "2",
        "--ranks-per-node",
        "2",
        "--spare-nodes",
        "1",
    ];
    launch.extend(extra);
    let job = frame_run_with(
        dir.path(),
        &launch,
        exe,
        &["--nx", "96", "--ny", "80", "--steps", "400"],
        &[
            ("FRAME_SNAPSHOT_INTERVAL", Some("50")),
            ("FRAME_CONFIG", None),
        ],
    );
    assert!(job.status.success(), "{}:\n{}", exe.display(), job.out);
    job
}

#[test]
fn a_c_program_built_with_find_package_frame_recovers_as_one_built_by_hand() {
    let _g = serial();
    let build = built("frame", &[("HEAT2D_SOURCE", "examples/c/heat2d.c")]);
    let bin = scratch();
    let by_hand = bin.path().join("heat2d_c");
    common::compile_c("examples/c/heat2d.c", &by_hand);
    let reference = common::final_checksum(&heat2d(&by_hand, &[]).out);
    for exe in ["heat2d_c", "heat2d_c_static"] {
        let exe = build.join(exe);
        assert_eq!(common::final_checksum(&heat2d(&exe, &[]).out), reference);
        let killed = heat2d(&exe, &["--inject", "rank:1@iter=275"]);
        assert!(killed.out.contains("rank 1 died"), "{}", killed.out);
        assert_eq!(
            common::final_checksum(&killed.out),
            reference,
            "{}",
            killed.out
        );
    }
}

#[test]
fn an_fti_program_built_with_find_package_fti_recovers_as_one_built_by_hand() {
    let _g = serial();
    let build = built(
        "fti",
        &[
            ("FTI_HEAT_SOURCE", "examples/c/fti_heat.c"),
            ("FTI_HEAT_F90_SOURCE", "examples/fortran/fti_heat.f90"),
        ],
    );
    let by_hand = Heat::new(fti::compile("examples/c/fti_heat.c", "fti_heat"));
    // Killed, its node's storage lost, run again: back from level 2.
    let shared = Heat::new(build.join("fti_heat"));
    shared.killed_and_resumed(0, &[1], &[], "L2", 119);
    assert_eq!(shared.reference(), by_hand.reference());
    let static_ = Heat::new(build.join("fti_heat_static"));
    assert_eq!(static_.reference(), by_hand.reference());
    let fortran = Heat::new(build.join("fti_heat_f90"));
    let fortran_by_hand = Heat::new(fti::compile_fortran(
        "examples/fortran/fti_heat.f90",
        "fti_heat_f90",
    ));
    assert_eq!(fortran.reference(), fortran_by_hand.reference());
}

#[test]
fn an_scr_program_built_with_find_package_scr_or_pkg_config_recovers_as_one_built_by_hand() {
    let _g = serial();
    let build = built("scr", &[("SCR_HEAT_SOURCE", "examples/c/scr_heat.c")]);
    let by_hand = scr::Heat::new(scr::compile("examples/c/scr_heat.c", "scr_heat"));
    // Killed, its node's cache lost, run again: back from level 2.
    let shared = scr::Heat::new(build.join("scr_heat"));
    shared.killed_and_resumed(&[("SCR_COPY_TYPE", "PARTNER")], &[1], "L2", 119);
    assert_eq!(shared.reference(), by_hand.reference());
    let static_ = scr::Heat::new(build.join("scr_heat_static"));
    assert_eq!(static_.reference(), by_hand.reference());
    // pkg-config alone, as a Makefile build finds it.
    let prefix = installed();
    let (status, flags, err) = run(
        Command::new("pkg-config")
            .args(["--cflags", "--libs", "scr"])
            .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig")),
        CHILD_DEADLINE,
    );
    assert!(status.success(), "pkg-config scr: {err}");
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("scr_heat_pkg_config");
    let (status, out, err) = run(
        Command::new("mpicc")
            .arg(Path::new(ROOT).join("examples/c/scr_heat.c"))
            .args(flags.split_whitespace())
            .arg(format!("-Wl,-rpath,{}", prefix.join("lib").display()))
            .arg("-o")
            .arg(&exe),
        CHILD_DEADLINE,
    );
    assert!(status.success(), "mpicc with pkg-config scr:\n{out}{err}");
    assert_eq!(scr::Heat::new(exe).reference(), by_hand.reference());
}

#[test]
fn a_veloc_program_built_with_find_package_veloc_recovers_as_one_built_by_hand() {
    let _g = serial();
    let build = built(
        "veloc",
        &[
            ("VELOC_HEAT_SOURCE", "benches/side_by_side/veloc_heat.c"),
            ("HEAT_INCLUDE", "examples/c"),
        ],
    );
    let by_hand = veloc::Heat::new(veloc::compile(
        "benches/side_by_side/veloc_heat.c",
        "veloc_heat",
    ));
    let installed = veloc::Heat::new(build.join("veloc_heat"));
    installed.killed_and_resumed("", &[], &[1], "L3", 119);
    assert_eq!(installed.reference(), by_hand.reference());
}
