#!/usr/bin/env bash
# Builds one application of benches/apps as published and with frame's
# patch, and measures it (measure.py): the fault-free time against the
# unmodified application; a rank's and a node's failure recovered online
# through frame's ULFM mode and by a relaunch, split into detection, MPI
# repair, retrieval and the application's re-initialisation; frame's
# retrieval against the iterative one at each level. Prints markdown
# tables (docs/APPS.md holds them). Not part of CI: the applications'
# sources are not in the repository (tests/ulfm/apps.rs runs this script on a
# stand-in of frame's own).
#
#   benches/apps/run.sh APP SOURCE_DIR [options]
#
# APP is a directory of benches/apps (hpccg, lulesh, comd); SOURCE_DIR a
# checkout of its repository at the commit app.toml pins. Options:
#   --sizes 8,16       rank counts (default: app.toml's sizes)
#   --runs N           runs of each measurement (default 3; medians)
#   --parts LIST       fault-free,ulfm-rank,ulfm-node,relaunch-rank,
#                      relaunch-node,levels (default: all)
#   --levels-size N    ranks of the level comparison (default: the first size)
#   --libframe DIR     use this libframe (built with the ulfm feature)
#                      instead of building one
#   --any-commit       measure SOURCE_DIR at another commit than the pinned one
#
# Needs Open MPI 5 with ULFM in target/openmpi-ulfm (scripts/test --setup
# installs it) or at FRAME_APPS_MPI. Builds go to target/apps/APP, the
# runs' node-local storage to /dev/shm (FRAME_APPS_SCRATCH).
set -euo pipefail

usage() { sed -n '12,24p' "$0" >&2; exit 2; }
[ $# -ge 2 ] || usage
app=$1
src=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
case $app in
    */* | .* | "") echo "run.sh: APP must be a directory name of benches/apps, not $app" >&2; exit 2 ;;
esac
[ -f "$here/$app/app.toml" ] || { echo "run.sh: no benches/apps/$app/app.toml" >&2; exit 2; }
[ -d "$src" ] || { echo "run.sh: SOURCE_DIR $src is not a directory" >&2; exit 2; }

libframe=""
forward=()
while [ $# -gt 0 ]; do
    case $1 in
        --libframe)
            [ $# -ge 2 ] || usage
            libframe=$2
            shift 2
            ;;
        -h | --help) usage ;;
        *)
            forward+=("$1")
            shift
            ;;
    esac
done

mpi=${FRAME_APPS_MPI:-$root/target/openmpi-ulfm}
if [ ! -x "$mpi/bin/mpirun" ] || [ ! -x "$mpi/bin/mpicc" ]; then
    echo "run.sh: no Open MPI 5 with ULFM at $mpi (scripts/test --setup installs it there; or set FRAME_APPS_MPI)" >&2
    exit 2
fi
if [ -z "$libframe" ]; then
    # A target directory of its own: rsmpi is built against Open MPI 5
    # here, against MPICH in the workspace's.
    echo "building libframe with the ulfm feature (target/ulfm)"
    (cd "$root" && PATH="$mpi/bin:$PATH" MPICC="$mpi/bin/mpicc" CARGO_TARGET_DIR="$root/target/ulfm" \
        cargo build --quiet --release -p frame-ffi --features ulfm)
    libframe=$root/target/ulfm/release
fi
[ -f "$libframe/libframe.so" ] || { echo "run.sh: no libframe.so in $libframe" >&2; exit 2; }

# No bytecode caches in the source tree.
exec env PYTHONDONTWRITEBYTECODE=1 python3 "$here/measure.py" "$here/$app/app.toml" "$src" \
    --mpi "$mpi" --libframe "$(cd "$libframe" && pwd)" --include "$root/ffi/include" \
    --work "$root/target/apps/$app" --scratch "${FRAME_APPS_SCRATCH:-/dev/shm}" \
    ${forward[@]+"${forward[@]}"}
