//! `frame run -- PROGRAM [ARGS]`

use frame_runtime::LaunchArgs;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

/// Finds `program` the way a shell would (a name without `/` is looked up in PATH).
fn resolve(program: &OsString) -> PathBuf {
    let p = PathBuf::from(program);
    if p.components().count() > 1 {
        return p;
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(&p))
        .find(|c| c.is_file())
        .unwrap_or(p)
}

pub fn run(args: &LaunchArgs, command: &[OsString]) -> anyhow::Result<ExitCode> {
    let (program, rest) = command
        .split_first()
        .ok_or_else(|| anyhow::anyhow!("no program given after --"))?;
    let launch = args.launch(resolve(program), rest.to_vec())?;
    // The launcher reports failures, recoveries and a summary as they happen.
    match launch.run() {
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(e) => {
            eprintln!("frame run: {e}");
            Ok(ExitCode::from(1))
        }
    }
}
