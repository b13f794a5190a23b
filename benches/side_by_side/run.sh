#!/usr/bin/env bash
# The same heat-solver work through FTI 1.6, VeloC 1.8 and frame (libfti,
# frame's FTI interface), in one run, on 8 MPI ranks of this machine (4
# virtual nodes of 2 ranks for FTI and frame): first and later checkpoints,
# the persistent (global) copy complete, restarts from node-local storage
# and from the global level with node storage wiped, and one-parity
# redundancy (FTI L3, frame L3) with the restart after a node is lost, and
# the node-local storage FTI and frame use at their peak with every level
# on. Medians of RUNS runs; every run must end with the checksum of the
# run without a crash. Not part of CI.
#
#   benches/side_by_side/build.sh PREFIX        # FTI and VeloC, once
#   benches/side_by_side/run.sh PREFIX [MIB] [RUNS]
#   ROWS=footprint benches/side_by_side/run.sh PREFIX [MIB] [RUNS]
#
# MIB is the grid per rank (default 256; the redundancy rows use a quarter,
# at most 64). ROWS=footprint measures only the node-local storage row
# (FTI alone needs building: build.sh PREFIX SOURCES fti); frame's
# FRAME_* variables reach its ranks, so FRAME_RETENTION_LEVELS=each shows
# the footprint of another retention. Node-local storage goes to /dev/shm, the global directory
# to target/side-by-side (the disk). Needs mpicc/mpiexec (MPICH).
set -euo pipefail

prefix=$(realpath "${1:?usage: run.sh PREFIX [MIB] [RUNS]}")
mib=${2:-256}
runs=${3:-3}
rows=${ROWS:-all}
[[ $rows == all || $rows == footprint ]] || { echo "ROWS must be all or footprint" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[[ $mib =~ ^[0-9]+$ && $mib -ge 1 && $mib -le 4096 ]] || { echo "MIB must be 1 to 4096" >&2; exit 2; }
[[ $runs =~ ^[0-9]+$ && $runs -ge 1 && $runs -le 50 ]] || { echo "RUNS must be 1 to 50" >&2; exit 2; }

ranks=8
ny=4094        # a row of 4096 doubles with its two halo cells
steps=16       # a checkpoint every 2 steps: 8 checkpoints
crash_at=10    # after the 5th checkpoint (steps 1, 3, 5, 7, 9)
ec_mib=$(( mib / 4 < 64 ? mib / 4 : 64 )); (( ec_mib >= 1 )) || ec_mib=1
nx_of() { echo $(( ( ($1 << 20) / ((ny + 2) * 8) - 2 ) * ranks )); }

work="$root/target/side-by-side"
shm=$(mktemp -d /dev/shm/frame-side-by-side-XXXXXX)
trap 'rm -rf "$shm"' EXIT
mkdir -p "$work/bin"
bin="$work/bin"

echo "building libfti (frame) and the three programs"
(cd "$root" && cargo build --quiet --release -p frame-fti --features mpi)
flags=(-std=gnu11 -O2)
mpicc "${flags[@]}" -I "$root/ffi/fti/include" "$root/examples/c/fti_heat.c" \
  -L "$root/target/release" -Wl,-rpath,"$root/target/release" -lfti -o "$bin/frame_heat"
mpicc "${flags[@]}" -I "$prefix/include" "$root/examples/c/fti_heat.c" \
  -L "$prefix/lib" -Wl,-rpath,"$prefix/lib" -lfti -o "$bin/fti_heat"
# RPATH, not RUNPATH: VeloC's client library finds its modules through it.
if [[ $rows == all ]]; then
  mpicc "${flags[@]}" -I "$prefix/include" -I "$root/examples/c" "$here/veloc_heat.c" \
    -L "$prefix/lib" -Wl,--disable-new-dtags,-rpath,"$prefix/lib" -lveloc-client -o "$bin/veloc_heat"
fi

# fti_config FILE LOCAL GLOBAL: FTI's INI for FTI and frame alike (FTI's
# metadata beside the global directory: it must outlive node storage).
fti_config() {
  mkdir -p "$2" "$3" "$3-meta"
  cat >"$1" <<INI
[basic]
head = 0
node_size = 2
ckpt_dir = $2
glbl_dir = $3
meta_dir = $3-meta
ckpt_l1 = 0
ckpt_l2 = 0
ckpt_l3 = 0
ckpt_l4 = 0
inline_l2 = 1
inline_l3 = 1
inline_l4 = 1
keep_last_ckpt = 0
group_size = 4
verbosity = 3
[restart]
failure = 0
exec_id = side-by-side
[advanced]
block_size = 1024
transfer_size = 16
mpi_tag = 2612
local_test = 1
INI
}

# veloc_config FILE LOCAL GLOBAL WHAT: VeloC, synchronous (its calls return
# once their work is done), as on one host (its unit is a host: one
# scratch directory, one module thread); WHAT: l1 or global. VeloC
# restarts only when a module vouches for a file (its checksum, or the
# persistent level finding the local file), so l1 names a persistent
# directory it does not write to within a run.
veloc_config() {
  mkdir -p "$2/scratch" "$2/meta" "$3"
  {
    echo "scratch = $2/scratch"
    echo "meta = $2/meta"
    echo "mode = sync"
    echo "max_versions = 2"
    echo "scratch_versions = 2"
    echo "persistent = $3"
    [[ $4 == l1 ]] && echo "persistent_interval = 86400"
    echo "ec_interval = -1"
  } >"$1"
}

# run LIBRARY LEVEL MIB DIR [CRASH_AT]: one run (a restart when DIR holds
# the checkpoints of a crashed run); prints its output.
run() {
  local lib=$1 level=$2 size=$3 dir=$4 crash=${5:-}
  local nx; nx=$(nx_of "$size")
  local local_dir="$shm/$dir" global_dir="$work/global/$dir" cfg="$work/$dir.cfg"
  if [[ ! -e $cfg ]]; then
    case $lib in
      veloc) veloc_config "$cfg" "$local_dir" "$global_dir" "$level" ;;
      *) fti_config "$cfg" "$local_dir" "$global_dir" ;;
    esac
  fi
  local n cycle=""
  case $level in
    l1) n=1 ;; ec) n=3 ;; global) n=4 ;;
    # Every checkpoint above level 1: level 2, 3, 2, 4 in turn.
    mixed) n=2 cycle=2,3,2,4 ;;
  esac
  local program="$bin/${lib}_heat"
  # frame's level 3 with one parity shard over groups of 4 nodes (FTI's
  # level 3 keeps as many parity shards as a group has nodes).
  env FTI_HEAT_LEVEL=$n ${cycle:+FTI_HEAT_LEVELS=$cycle} FTI_HEAT_EVERY=2 HEAT_EVERY=2 FRAME_L3_PARITY=1 FRAME_L3_GROUP_SIZE=4 \
    mpiexec -n $ranks "$program" "$cfg" "$nx" "$ny" "$steps" $crash 2>&1 || true
}

checksum() { sed -n 's/^final checksum: //p' <<<"$1"; }
first_ms() { sed -n 's/^checkpoints: [0-9]*, the first \([0-9.]*\) ms.*/\1/p' <<<"$1"; }
later_ms() { sed -n 's/.*the later ones \([0-9.]*\) ms each.*/\1/p' <<<"$1"; }
restart_ms() { sed -n 's/^restarted at step [0-9]* in \([0-9.]*\) ms/\1/p' <<<"$1"; }
median() { sort -g | awk '{v[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR+1)/2]; else printf "%.2f\n", (v[NR/2]+v[NR/2+1])/2}'; }

# lose WHAT LIBRARY DIR: removes a crashed run's node-local storage: all
# of it (WHAT=all) or node 1's (ranks 2 and 3; for VeloC, whose failure
# domain is a rank, rank 2's files).
lose() {
  local what=$1 lib=$2 dir="$shm/$3"
  if [[ $what == all ]]; then
    # Every file goes; the (empty) directories a job script would make stay.
    find "$dir" -mindepth 1 -type f -delete
    return
  fi
  case $lib in
    frame) rm -rf "$dir"/node-1 ;;
    fti) find "$dir" -type f \( -name '*Rank2.*' -o -name '*Rank3.*' -o -name '*RSed2.*' -o -name '*RSed3.*' \) -delete ;;
  esac
}

reference=""
declare -A result
measure() {
  local lib=$1
  for ((i = 0; i < runs; i++)); do
    local tag="$lib-$i"
    out=$(run "$lib" l1 "$mib" "l1-$tag")
    sum=$(checksum "$out")
    [[ -n $sum ]] || { echo "$lib: no checksum:"; echo "$out" | tail -20; exit 1; }
    [[ -z $reference ]] && reference=$sum
    [[ $sum == "$reference" ]] || { echo "$lib: checksum $sum, expected $reference"; exit 1; }
    echo "$(first_ms "$out")" >>"$work/$lib.first"
    echo "$(later_ms "$out")" >>"$work/$lib.later"
    rm -rf "$shm/l1-$tag"

    out=$(run "$lib" global "$mib" "g-$tag")
    [[ $(checksum "$out") == "$reference" ]] || { echo "$lib global: wrong checksum"; echo "$out" | tail -20; exit 1; }
    echo "$(later_ms "$out")" >>"$work/$lib.global"
    rm -rf "$shm/g-$tag" "$work/global/g-$tag" "$work/global/g-$tag-meta"

    for what in l1 global; do
      out=$(run "$lib" $what "$mib" "r$what-$tag" $crash_at)
      grep -q "crashing at step" <<<"$out" || { echo "$lib $what: no crash"; echo "$out" | tail -20; exit 1; }
      [[ $what == global ]] && lose all "$lib" "r$what-$tag"
      out=$(run "$lib" $what "$mib" "r$what-$tag" $crash_at)
      [[ $(checksum "$out") == "$reference" ]] || { echo "$lib restart $what: wrong checksum"; echo "$out" | tail -20; exit 1; }
      echo "$(restart_ms "$out")" >>"$work/$lib.restart-$what"
      rm -rf "$shm/r$what-$tag" "$work/global/r$what-$tag" "$work/global/r$what-$tag-meta"
    done
  done
}

echo "fti_heat/veloc_heat on $ranks ranks, $mib MiB of grid per rank, $steps steps, a checkpoint every 2; $runs runs, medians (ms)"
rm -rf "$work"/*.first "$work"/*.later "$work"/*.global "$work"/*.restart-* "$work"/*.ec* "$work"/*.footprint "$work"/*.cfg "$work/global"
if [[ $rows == all ]]; then
  for lib in fti veloc frame; do measure $lib; done
else
  reference=$(checksum "$(run frame l1 "$mib" "ref")")
  rm -rf "$shm/ref"
fi

# One parity at a quarter of the size: redundancy complete, then a restart
# after node 1 is lost. FTI's level 3 (as many parity shards as a group has
# nodes) and frame's with one parity shard. VeloC is left out: it codes
# across hosts, and turns erasure coding off on one (its unit is a host,
# served by one module thread through a queue named after the host, so it
# cannot be split into virtual nodes on one machine).
ec_reference=""
[[ $rows == all ]] && ec_libs=(fti frame) || ec_libs=()
for lib in "${ec_libs[@]}"; do
  for ((i = 0; i < runs; i++)); do
    tag="ec-$lib-$i"
    out=$(run "$lib" ec "$ec_mib" "$tag" $crash_at)
    grep -q "crashing at step" <<<"$out" || { echo "$lib ec: no crash"; echo "$out" | tail -20; exit 1; }
    lose node "$lib" "$tag"
    out=$(run "$lib" ec "$ec_mib" "$tag" $crash_at)
    sum=$(checksum "$out")
    [[ -z $ec_reference ]] && ec_reference=$(checksum "$(run frame l1 "$ec_mib" "ec-ref-$i")")
    [[ $sum == "$ec_reference" ]] || { echo "$lib ec restart: checksum '$sum', expected $ec_reference"; echo "$out" | tail -20; exit 1; }
    echo "$(restart_ms "$out")" >>"$work/$lib.ec-restart"
    rm -rf "$shm/$tag" "$shm/ec-ref-$i"
    out=$(run "$lib" ec "$ec_mib" "$tag-full")
    echo "$(later_ms "$out")" >>"$work/$lib.ec"
    rm -rf "$shm/$tag-full"
  done
done

# peak_of DIR STOP: the most bytes DIR's files take (allocated, as du
# counts them) until the file STOP appears, sampled every 20 ms.
peak_of() {
  local dir=$1 stop=$2 peak=0 now
  while [[ ! -e $stop ]]; do
    # du fails when a file goes while it counts; its total still stands.
    now=$(du -s -B1 "$dir" 2>/dev/null | cut -f1 || true)
    (( ${now:-0} > peak )) && peak=$now
    sleep 0.02
  done
  echo "$peak"
}

# Node-local storage at its peak with every level on (the checkpoints
# going to levels 2, 3, 2, 4 in turn), over the 4 nodes, as a multiple of
# the application's data (8 ranks x MIB). FTI keeps its newest checkpoint;
# frame its defaults (docs/STORAGE.md).
for lib in fti frame; do
  for ((i = 0; i < runs; i++)); do
    tag="fp-$lib-$i"
    rm -f "$work/$tag.stop"
    mkdir -p "$shm/$tag"
    peak_of "$shm/$tag" "$work/$tag.stop" >"$work/$tag.peak" &
    sampler=$!
    out=$(run "$lib" mixed "$mib" "$tag")
    touch "$work/$tag.stop"
    wait "$sampler"
    [[ $(checksum "$out") == "$reference" ]] || { echo "$lib footprint run: wrong checksum"; echo "$out" | tail -20; exit 1; }
    awk -v peak="$(cat "$work/$tag.peak")" -v data=$(( ranks * mib << 20 )) \
      'BEGIN { printf "%.2f\n", peak / data }' >>"$work/$lib.footprint"
    rm -rf "$shm/$tag" "$work/global/$tag" "$work/global/$tag-meta" "$work/$tag.stop" "$work/$tag.peak"
  done
done

row() {
  printf '| %s |' "$1"
  for lib in veloc fti frame; do
    if [[ -s $work/$lib.$2 ]]; then printf ' %s |' "$(median <"$work/$lib.$2")"; else printf ' — |'; fi
  done
  echo
}
echo
echo "| $mib MiB per rank, 8 ranks | VeloC 1.8 | FTI 1.6 | frame |"
echo "|---|---:|---:|---:|"
if [[ $rows == footprint ]]; then
  row "node-local storage at its peak, every level on (x the data)" footprint
  echo "frame: retention.levels = ${FRAME_RETENTION_LEVELS:-newest (the default of FTI programs)}"
  exit 0
fi
row "first checkpoint (new files)" first
row "later checkpoints (files reused)" later
row "checkpoint with the global copy complete" global
row "restart from node-local storage" restart-l1
row "restart from the global level, node storage wiped" restart-global
row "$ec_mib MiB per rank, one parity: checkpoint with redundancy complete" ec
row "the same, restart after node 1 lost" ec-restart
row "node-local storage at its peak, every level on (x the data)" footprint
echo "every run ended with the checksum of the run without a crash ($reference; $ec_reference at $ec_mib MiB)"
