//! Fortran programs on libfti's module `fti` (`--features mpi`), under
//! `mpiexec` with 8 ranks as 4 virtual nodes: `examples/fortran/fti_heat.f90`,
//! written against FTI's Fortran interface only, killed and run again with
//! each level's copies lost in turn, recovers bit-exact from L1 to L4; and
//! FTI_Protect's forms for every intrinsic type and rank.

use crate::common;

use common::fti::{self, Heat};
use common::mpirun::mpiexec;
use common::{scratch, serial};
use std::sync::OnceLock;

/// `examples/fortran/fti_heat.f90`, built once.
fn heat() -> &'static Heat {
    static HEAT: OnceLock<Heat> = OnceLock::new();
    HEAT.get_or_init(|| {
        Heat::new(fti::compile_fortran(
            "examples/fortran/fti_heat.f90",
            "fti_heat_f90",
        ))
    })
}

#[test]
fn fortran_heat_killed_and_run_again_resumes_bit_exact_at_every_level() {
    let _serial = serial();
    heat().killed_and_resumed_at_every_level(0);
}

#[test]
fn fortran_heat_with_a_dedicated_manager_rank_per_node() {
    let _serial = serial();
    heat().killed_and_resumed(1, &[1], &[], "L2", 119);
}

#[test]
fn fortran_protect_covers_every_intrinsic_type_and_rank_and_refuses_sections() {
    let _serial = serial();
    let program = fti::compile_fortran("tests/fortran/fti_types.f90", "fti_types_f90");
    let dir = scratch();
    let config = fti::config(dir.path(), 0, 2, 1);
    let config = config.to_str().unwrap();
    let first = mpiexec(dir.path(), 4, &program, &[config], &[]);
    assert!(!first.status.success(), "{}", first.out);
    assert!(first.out.contains("types: checkpointed"), "{}", first.out);
    assert!(!first.out.contains("FAIL"), "{}", first.out);
    let second = mpiexec(dir.path(), 4, &program, &[config], &[]);
    assert!(second.status.success(), "{}", second.out);
    assert!(!second.out.contains("FAIL"), "{}", second.out);
    assert!(
        second.out.contains("types: all recovered"),
        "{}",
        second.out
    );
}
