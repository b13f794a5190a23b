//! Which ranks learn of a failure, by error scope and uniform mode: the
//! two experiments of docs/ULFM.md ("Error scopes"), run under
//! `mpirun --with-ft ulfm -n 6` (the `ulfm` feature).
//!
//! `--scope S` (operation, communicator or universe): the job splits in a
//! group of ranks 0-3 and a group of ranks 4-5, each an `MpiComm` with
//! error scope S. Rank 3 dies. Rank 2 was receiving from it and sees the
//! failure in any scope. Ranks 0 and 1 exchange messages on the first
//! group, ranks 4 and 5 on the second, none with rank 3: each pair goes on
//! until it sees an error or rank 2 tells it to stop (over a communicator
//! of its own). Rank 2 tells only the pairs the scope does not reach:
//! both in the operation scope, the second in the communicator scope, none
//! in the universe scope; a pair the scope fails to reach never stops, so
//! the caller's deadline catches it.
//!
//! `--uniform on|off`: every rank broadcasts from rank 0 on one
//! `MpiComm` over the job; rank 5 dies before broadcast 10; each survivor
//! prints the first broadcast that failed for it (uniform: the same at
//! every rank).
//!
//! `--leave`: uniform mode on one `MpiComm` over the job, every rank
//! calling barriers; before barrier 10 rank 5 dies and rank 1, instead of
//! the barrier, receives from rank 5, fails, revokes the communicator and
//! leaves it (as frame's runtime does when a program returns an error),
//! staying alive until the others are done. Each of ranks 0, 2, 3 and 4
//! must fail at barrier 10: their agreement never gets rank 1's part.
//!
//! Each survivor prints one line `rank R: ...` and ends without
//! `MPI_Finalize` (Open MPI 5.0.x can hang there after a failure), once
//! the other survivors of the `--uniform` and `--leave` experiments are
//! done too.
//!
//! `--cost ROUNDS`, with no failure: what each mode costs an operation
//! (an all-reduce of one integer, broadcasts of 8 bytes and 64 KiB, a
//! ping-pong of 8 bytes between ranks 0 and 1), as the median of five
//! trials (each the slowest rank's time) of ROUNDS operations, the modes interleaved; rank 0 prints
//! `cost: OPERATION MODE MICROSECONDS` lines (benches/ulfm.rs reads them).

use clap::Parser;
use frame::comm::mpi::{ulfm, ErrorScope, MpiComm};
use frame::comm::Comm;
use mpi::collective::SystemOperation;
use mpi::topology::Communicator;
use mpi::traits::*;
use std::io::Write;

#[derive(Parser)]
struct Args {
    /// The error scope of the two groups' communicators.
    #[arg(long, conflicts_with = "uniform")]
    scope: Option<ErrorScope>,
    /// Uniform error reporting on the job's communicator (on or off).
    #[arg(long, value_parser = ["on", "off"])]
    uniform: Option<String>,
    /// Measure each mode's cost without failures, in ROUNDS operations.
    #[arg(long, value_name = "ROUNDS", conflicts_with_all = ["scope", "uniform"])]
    cost: Option<u32>,
    /// A rank leaves the communicator after an error while the others
    /// are in a collective of uniform mode.
    #[arg(long, conflicts_with_all = ["scope", "uniform", "cost"])]
    leave: bool,
}

/// The tag of the groups' messages.
const TAG: u32 = 1;
/// Broadcasts before the victim dies in the uniform experiment.
const DIES_BEFORE: u64 = 10;
/// Broadcasts after which a survivor that saw no error stops.
const BROADCASTS: u64 = DIES_BEFORE + 200;

fn main() {
    let args = Args::parse();
    let Some(universe) = mpi::initialize() else {
        eprintln!("error_scopes: MPI was initialised already");
        std::process::exit(2);
    };
    let world = ulfm::duplicate(&universe.world());
    let rank = world.rank();
    if let Some(rounds) = args.cost {
        cost(&world, rounds.max(1));
        return;
    }
    let line = match (args.scope, args.uniform.as_deref()) {
        _ if args.leave => leave(&world),
        (Some(scope), _) => scopes(&world, scope),
        (None, Some(mode)) => uniform(&world, mode == "on"),
        (None, None) => {
            eprintln!("error_scopes: --scope, --uniform, --leave or --cost is needed");
            std::process::exit(2);
        }
    };
    println!("rank {rank}: {line}");
    let _ = std::io::stdout().flush();
    // SAFETY: ends the process at once (see the module documentation).
    unsafe { exit_now(0) }
}

/// The error-scope experiment; this rank's line.
fn scopes(world: &mpi::topology::SimpleCommunicator, scope: ErrorScope) -> String {
    let rank = world.rank();
    let group = world
        .split_by_color(mpi::topology::Color::with_value(i32::from(rank >= 4)))
        .expect("every rank has a colour");
    let comm = MpiComm::with_node(&group, 0)
        .expect("a communicator")
        .with_error_scope(scope);
    // Stop messages travel apart from the groups' traffic.
    let control = ulfm::duplicate(world);
    world.barrier();
    match rank {
        3 => die(),
        2 => {
            let seen = comm.recv(3, TAG);
            let stop: &[i32] = match scope {
                ErrorScope::Operation => &[0, 4],
                ErrorScope::Communicator => &[4],
                ErrorScope::Universe => &[],
            };
            for r in stop {
                control.process_at_rank(*r).send(&1u8);
            }
            outcome(seen.map(|_| 0))
        }
        0 | 4 => {
            let mut rounds = 0u64;
            let result = loop {
                let stop = control.process_at_rank(2).immediate_probe().is_some();
                if stop {
                    let _ = control.process_at_rank(2).receive::<u8>();
                }
                if let Err(e) = comm.send(1, TAG, &[u8::from(stop)]) {
                    break Err(e);
                }
                if stop {
                    break Ok(rounds);
                }
                if let Err(e) = comm.recv(1, TAG) {
                    break Err(e);
                }
                rounds += 1;
            };
            outcome(result)
        }
        _ => {
            let mut rounds = 0u64;
            let result = loop {
                match comm.recv(0, TAG) {
                    Ok(m) if m.first() == Some(&1) => break Ok(rounds),
                    Ok(_) => {}
                    Err(e) => break Err(e),
                }
                if let Err(e) = comm.send(0, TAG, b"") {
                    break Err(e);
                }
                rounds += 1;
            };
            outcome(result)
        }
    }
}

/// The uniform experiment; this rank's line.
fn uniform(world: &mpi::topology::SimpleCommunicator, on: bool) -> String {
    let comm = MpiComm::with_node(world, 0)
        .expect("a communicator")
        .with_uniform_errors(on);
    let control = ulfm::duplicate(world);
    let line = (|| {
        for i in 0..BROADCASTS {
            if i == DIES_BEFORE && world.rank() == 5 {
                die();
            }
            let mut data = i.to_le_bytes().to_vec();
            if let Err(e) = comm.broadcast(&mut data, 0) {
                return format!("first error at broadcast {i}: {e}");
            }
        }
        format!("no error in {BROADCASTS} broadcasts")
    })();
    rendezvous(&control, &[0, 1, 2, 3, 4]);
    line
}

/// The experiment of a rank that leaves after an error; this rank's line.
fn leave(world: &mpi::topology::SimpleCommunicator) -> String {
    let comm = MpiComm::with_node(world, 0)
        .expect("a communicator")
        .with_uniform_errors(true);
    let control = ulfm::duplicate(world);
    let rank = world.rank();
    let line = (|| {
        for i in 0..BROADCASTS {
            if i == DIES_BEFORE {
                match rank {
                    5 => die(),
                    1 => {
                        let seen = comm.recv(5, TAG);
                        comm.revoke();
                        return format!("left at barrier {i}: {}", outcome(seen.map(|_| 0)));
                    }
                    _ => {}
                }
            }
            if let Err(e) = comm.barrier() {
                return format!("first error at barrier {i}: {e}");
            }
        }
        format!("no error in {BROADCASTS} barriers")
    })();
    rendezvous(&control, &[0, 1, 2, 3, 4]);
    line
}

/// Waits until every rank of `survivors` got here over `control`: a rank
/// that ended sooner would be one more failure for the others (on a busy
/// machine the root of the broadcasts finishes long before the ranks
/// receiving them).
fn rendezvous(control: &mpi::topology::SimpleCommunicator, survivors: &[i32]) {
    let rank = control.rank();
    let others = survivors.iter().filter(|r| **r != rank);
    for r in others.clone() {
        control.process_at_rank(*r).send(&1u8);
    }
    for r in others {
        let _ = control.process_at_rank(*r).receive::<u8>();
    }
}

/// The fault-free cost experiment (see the module documentation).
fn cost(world: &mpi::topology::SimpleCommunicator, rounds: u32) {
    let modes = [
        ("operation", ErrorScope::Operation, false),
        ("communicator", ErrorScope::Communicator, false),
        ("universe", ErrorScope::Universe, false),
        ("uniform", ErrorScope::Operation, true),
    ];
    let comms: Vec<MpiComm> = modes
        .iter()
        .map(|(_, scope, uniform)| {
            MpiComm::with_node(world, 0)
                .expect("a communicator")
                .with_error_scope(*scope)
                .with_uniform_errors(*uniform)
        })
        .collect();
    let rank = world.rank();
    let operations = [
        "all-reduce",
        "broadcast-8B",
        "broadcast-64KiB",
        "ping-pong-8B",
    ];
    // Microseconds per operation, by operation, mode and trial.
    let mut times = vec![vec![Vec::new(); modes.len()]; operations.len()];
    for _trial in 0..5 {
        for (o, operation) in operations.iter().enumerate() {
            for (m, comm) in comms.iter().enumerate() {
                world.barrier();
                let start = std::time::Instant::now();
                for _ in 0..rounds {
                    let done = match *operation {
                        "all-reduce" => comm.all_reduce_u64(&mut [1], frame::comm::ReduceOp::Sum),
                        "broadcast-8B" => comm.broadcast(&mut vec![0u8; 8], 0),
                        "broadcast-64KiB" => comm.broadcast(&mut vec![0u8; 64 << 10], 0),
                        _ => match rank {
                            0 => comm
                                .send(1, TAG, &[0u8; 8])
                                .and_then(|_| comm.recv(1, TAG).map(drop)),
                            1 => comm.recv(0, TAG).and_then(|m| comm.send(0, TAG, &m)),
                            _ => Ok(()),
                        },
                    };
                    done.expect("no failure in the cost experiment");
                }
                let us = start.elapsed().as_secs_f64() * 1e6 / f64::from(rounds);
                // The time of the slowest rank.
                let mut slowest = 0.0f64;
                world.all_reduce_into(&us, &mut slowest, SystemOperation::max());
                times[o][m].push(slowest);
            }
        }
    }
    if rank == 0 {
        for (o, operation) in operations.iter().enumerate() {
            for (m, (mode, _, _)) in modes.iter().enumerate() {
                let mut t = times[o][m].clone();
                t.sort_by(f64::total_cmp);
                println!("cost: {operation} {mode} {:.2}", t[t.len() / 2]);
            }
        }
    }
}

/// This rank's line for a result.
fn outcome(result: Result<u64, frame::comm::CommError>) -> String {
    match result {
        Ok(rounds) => format!("no error ({rounds} rounds)"),
        Err(e) => format!("error: {e}"),
    }
}

/// A real process failure: SIGKILL to this process.
fn die() -> ! {
    let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    loop {
        std::thread::park();
    }
}

/// `_exit`, without MPI's or Rust's exit code.
unsafe fn exit_now(code: i32) -> ! {
    extern "C" {
        fn _exit(code: i32) -> !;
    }
    // SAFETY: `_exit` takes any status and does not return.
    unsafe { _exit(code) }
}
