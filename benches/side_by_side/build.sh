#!/usr/bin/env bash
# Builds the libraries frame is compared with: FTI 1.6 and VeloC 1.8 (with
# the ECP-VeloC components its erasure coding needs), each from its public
# source, installed under one prefix. Not part of CI.
#
#   benches/side_by_side/build.sh PREFIX [SOURCES [NAME...]]
#
# SOURCES holds checkouts named fti, VELOC, KVTree, rankstr, shuffile,
# redset, er and AXL; any that is missing is cloned from GitHub at the version
# below. NAMEs build only those components (`fti` alone is what the
# node-local storage row of run.sh needs: ROWS=footprint). Needs cmake, an MPI (mpicc), OpenSSL, zlib and Boost headers
# (Debian: apt-get install -y cmake libssl-dev zlib1g-dev libboost-dev).
set -euo pipefail

prefix=$(realpath -m "${1:?usage: build.sh PREFIX [SOURCES [NAME...]]}")
sources=$(realpath -m "${2:-$prefix/src}")
shift $(( $# < 2 ? $# : 2 ))
wanted=("$@")
mkdir -p "$prefix" "$sources"

# name, repository, version (tag)
components=(
  "KVTree  https://github.com/ECP-VeloC/KVTree.git   v1.5.0"
  "rankstr https://github.com/ECP-VeloC/rankstr.git  v0.4.0"
  "shuffile https://github.com/ECP-VeloC/shuffile.git v0.4.0"
  "redset  https://github.com/ECP-VeloC/redset.git   v0.4.0"
  "er      https://github.com/ECP-VeloC/er.git       v0.5.0"
  "AXL     https://github.com/ECP-VeloC/AXL.git      v0.9.0"
  "VELOC   https://github.com/ECP-VeloC/VELOC.git    veloc-1.8"
  "fti     https://github.com/leobago/fti.git        v1.6"
)

jobs=$(nproc)
for entry in "${components[@]}"; do
  read -r name url tag <<<"$entry"
  if (( ${#wanted[@]} )) && [[ " ${wanted[*]} " != *" $name "* ]]; then
    continue
  fi
  src="$sources/$name"
  stamp="$prefix/.built-$name"
  [[ -e $stamp ]] && continue
  if [[ ! -d $src ]]; then
    git clone --quiet --depth 1 --branch "$tag" "$url" "$src"
  fi
  build="$prefix/build/$name"
  rm -rf "$build"
  mkdir -p "$build"
  flags=(-DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_PREFIX_PATH="$prefix"
         -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON)
  case $name in
    AXL) flags+=(-DENABLE_IBM_BBAPI=OFF -DENABLE_TESTS=OFF) ;;
    redset) flags+=(-DENABLE_CUDA=OFF -DENABLE_OPENMP=OFF -DENABLE_PTHREADS=ON) ;;
    VELOC) flags+=(-DCOMM_QUEUE=ipc_queue -DVELOC_RESOURCE_MANAGER=NONE -DPOSIX_IO=rw) ;;
    fti) flags+=(-DENABLE_FORTRAN=OFF -DENABLE_EXAMPLES=OFF -DENABLE_TESTS=OFF) ;;
  esac
  echo "building $name ($tag)"
  cmake -S "$src" -B "$build" "${flags[@]}" >"$build/configure.log" 2>&1 ||
    { tail -30 "$build/configure.log"; exit 1; }
  cmake --build "$build" -j "$jobs" >"$build/build.log" 2>&1 ||
    { tail -40 "$build/build.log"; exit 1; }
  cmake --install "$build" >"$build/install.log" 2>&1 ||
    { tail -20 "$build/install.log"; exit 1; }
  touch "$stamp"
done
echo "${wanted[*]:-FTI and VeloC} installed under $prefix"
