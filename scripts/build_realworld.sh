#!/usr/bin/env bash
# Build the real-world guests -- programs nobody here wrote, from the C sources their
# Python packages publish as source distributions -- into RV32IM ELFs with scripts/rv32-cc
# (picolibc).  Only the small drivers (guests/realworld/*.c) are in this repository; the
# third-party sources are fetched at build time with pip into a cache and never committed.
#
#   keccak     Keccak-256 (pycryptodome 3.20.0: src/keccak.c)  -> keccak256.elf
#   secp256k1  ECDSA verify + recover (libsecp256k1 bundled in secp256k1 0.14.0:
#              libsecp256k1/, ECMULT_WINDOW_SIZE=8, recovery module) -> secp256k1_verify.elf
#   lua        the Lua 5.4 interpreter (lupa 2.8: third-party/lua54/) -> lua_run.elf
#
# Usage:
#   scripts/build_realworld.sh [--out DIR] [--host-refs] [keccak|secp256k1|lua ...]
#     (no names: all three)
#   --out DIR     where the ELFs go (default: $CACHE/elf)
#   --host-refs   also install the host-side references the tests compare with (binary
#                 wheels pycryptodome, coincurve, lupa) into $CACHE/hostref-<python tag>,
#                 for PYTHONPATH; best effort (a failure is reported, not fatal)
#   --print-cache print the cache directory and exit
#
# Cache: $STEADFAST_GUESTS_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/steadfast-guests:
#   sdist/   the downloaded sdists, checked against the sha256 sums pinned below
#   src/     their unpacked sources
#   elf/     the ELFs, each with NAME.stamp (the hash of everything it was built from: a
#            rebuild is skipped when it matches) and BUILD-INFO (versions, flags)
# The sdists are fetched with `pip download --no-deps --no-binary PKG PKG==VERSION` (the
# package's own source distribution; `--no-binary :all:` would also force pip's build
# backend from source just to read the metadata).  Python: $PYTHON, default the
# checkout's .venv/bin/python, else python3.
#
# The ELFs are byte-reproducible for one compiler and picolibc (file paths are mapped
# away: -ffile-prefix-map).
#
# Exit status: 0 built (or up to date); 2 the compiler or picolibc is missing, or bad
# usage; 3 a download failed (offline?) or a checksum did not match.
set -euo pipefail
export LC_ALL=C SOURCE_DATE_EPOCH=0
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${STEADFAST_GUESTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/steadfast-guests}
if [ -n "${PYTHON:-}" ]; then
    py=$PYTHON
elif [ -x "$root/.venv/bin/python" ]; then
    py=$root/.venv/bin/python
else
    py=python3
fi

# name  version  sha256 of the sdist
PKGS="
pycryptodome 3.20.0 09609209ed7de61c2b560cc5c8c4fbf892f8b15b1faf7e4cbffac97db1fffda7
secp256k1 0.14.0 82c06712d69ef945220c8b53c1a0d424c2ff6a1f64aee609030df79ad8383397
lupa 2.8 d8022641b9ec8ecf2c5ecbe9f47e5a70e0b87c4b5ae921b92cb02a638e0acd08
"
HOSTREFS=(pycryptodome==3.20.0 coincurve==21.0.0 lupa==2.8)
SECP_WINDOW=8

out=""
hostrefs=0
names=()
while [ "$#" -gt 0 ]; do
    case "$1" in
        --out) out=${2:?--out needs a directory}; shift 2 ;;
        --host-refs) hostrefs=1; shift ;;
        --print-cache) echo "$cache"; exit 0 ;;
        keccak|secp256k1|lua) names+=("$1"); shift ;;
        -h|--help) sed -n '2,39p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "build_realworld.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ "${#names[@]}" = 0 ] && names=(keccak secp256k1 lua)
out=${out:-$cache/elf}
mkdir -p "$cache/sdist" "$cache/src" "$out"
out=$(cd "$out" && pwd)

cc=("$root/scripts/rv32-cc")
# rv32-cc checks the compiler and picolibc itself (exit 2 with the package to install)
"${cc[@]}" --version >/dev/null || exit 2

# fetch NAME: the sdist's unpacked directory on stdout
fetch() {
    local name=$1 line version sum file dir
    line=$(printf '%s\n' "$PKGS" | awk -v n="$name" '$1 == n')
    version=$(echo "$line" | awk '{print $2}')
    sum=$(echo "$line" | awk '{print $3}')
    file=$cache/sdist/$name-$version.tar.gz
    if [ ! -f "$file" ] || ! echo "$sum  $file" | sha256sum -c --status; then
        rm -f "$file"
        echo "build_realworld.sh: downloading the $name $version sdist" >&2
        # LUPA_NO_LUAJIT: lupa's setup.py would build LuaJIT twice just for the metadata
        if ! LUPA_NO_LUAJIT=true "$py" -m pip download --quiet --disable-pip-version-check --no-deps \
                --no-binary "$name" "$name==$version" -d "$cache/sdist" >&2 ||
           [ ! -f "$file" ]; then
            echo "build_realworld.sh: could not download the $name $version sdist" \
                 "(offline? pip download --no-deps --no-binary $name $name==$version)" >&2
            exit 3
        fi
        if ! echo "$sum  $file" | sha256sum -c --status; then
            echo "build_realworld.sh: $file: sha256 $(sha256sum "$file" | cut -d' ' -f1)," \
                 "expected $sum" >&2
            rm -f "$file"
            exit 3
        fi
    fi
    dir=$cache/src/$name-$version
    if [ ! -f "$dir/.unpacked" ]; then
        rm -rf "$dir"
        tar -xzf "$file" -C "$cache/src"
        touch "$dir/.unpacked"
    fi
    echo "$dir"
}

# build NAME OUT.elf SRCDIR -- rv32-cc args: skipped when the stamp matches
build() {
    local name=$1 elf=$2 src=$3
    shift 3
    local stamp
    stamp=$({ printf '%s\n' "$@"
              cat "$root/scripts/rv32-cc" "$root/scripts/build_realworld.sh" \
                  "$root"/guests/libc/*.c "$root"/guests/libc/*.S "$root"/guests/libc/*.ld \
                  "$root"/guests/realworld/*.c
              riscv64-unknown-elf-gcc --version | head -n 1
              dpkg-query -W picolibc-riscv64-unknown-elf 2>/dev/null || true
            } | sha256sum | cut -d' ' -f1)
    if [ -f "$out/$elf" ] && [ "$(cat "$out/$elf.stamp" 2>/dev/null)" = "$stamp" ]; then
        echo "build_realworld.sh: $out/$elf is up to date" >&2
        return
    fi
    (cd "$src" && "${cc[@]}" -O2 "-ffile-prefix-map=$src=$(basename "$src")" \
        "-ffile-prefix-map=$root=." "$@" -o "$out/$elf.tmp")
    mv "$out/$elf.tmp" "$out/$elf"
    echo "$stamp" > "$out/$elf.stamp"
    echo "build_realworld.sh: built $out/$elf ($name)" >&2
}

info=()
for name in "${names[@]}"; do
    case "$name" in
        keccak)
            src=$(fetch pycryptodome)
            build keccak keccak256.elf "$src/src" -DHAVE_STDINT_H -DHAVE_POSIX_MEMALIGN \
                -DPYCRYPTO_LITTLE_ENDIAN -I. "$root/guests/realworld/keccak256.c"
            info+=("keccak256.elf: pycryptodome 3.20.0 src/keccak.c + guests/realworld/keccak256.c, -O2")
            ;;
        secp256k1)
            src=$(fetch secp256k1)
            build secp256k1 secp256k1_verify.elf "$src/libsecp256k1" \
                "-DECMULT_WINDOW_SIZE=$SECP_WINDOW" -DECMULT_GEN_PREC_BITS=4 \
                -DENABLE_MODULE_RECOVERY=1 -Iinclude -Isrc src/secp256k1.c \
                "$root/guests/realworld/secp256k1_verify.c"
            info+=("secp256k1_verify.elf: libsecp256k1 from secp256k1 0.14.0 (src/secp256k1.c, recovery module, ECMULT_WINDOW_SIZE=$SECP_WINDOW) + guests/realworld/secp256k1_verify.c, -O2")
            ;;
        lua)
            src=$(fetch lupa)
            lua=$src/third-party/lua54
            mapfile -t luasrc < <(cd "$lua" && ls ./*.c | grep -v -e '/lua\.c$' -e '/luac\.c$' \
                                 -e '/onelua\.c$' -e '/ltests\.c$' | sort)
            build lua lua_run.elf "$lua" -std=gnu99 -I. "${luasrc[@]}" \
                "$root/guests/realworld/lua_run.c"
            info+=("lua_run.elf: Lua $(sed -n 's/^#define LUA_VERSION_RELEASE_NUM.*+ *\([0-9]*\)).*/5.4.\1/p' "$lua/lua.h") from lupa 2.8 third-party/lua54 (all but lua.c, luac.c, onelua.c, ltests.c) + guests/realworld/lua_run.c, -O2 -std=gnu99")
            ;;
    esac
done
{
    echo "built by scripts/build_realworld.sh with scripts/rv32-cc"
    riscv64-unknown-elf-gcc --version | head -n 1
    echo "picolibc $(dpkg-query -W -f '${Version}' picolibc-riscv64-unknown-elf 2>/dev/null || echo '?')"
    printf '%s\n' "${info[@]}"
} > "$out/BUILD-INFO.$$" && mv "$out/BUILD-INFO.$$" "$out/BUILD-INFO"

if [ "$hostrefs" = 1 ]; then
    tag=$("$py" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
    ref=$cache/hostref-$tag
    if [ ! -f "$ref/.installed" ]; then
        echo "build_realworld.sh: installing the host references into $ref" >&2
        if "$py" -m pip install --quiet --disable-pip-version-check --target "$ref.tmp" \
               "${HOSTREFS[@]}" >&2; then
            rm -rf "$ref" && mv "$ref.tmp" "$ref" && touch "$ref/.installed"
        else
            rm -rf "$ref.tmp"
            echo "build_realworld.sh: could not install ${HOSTREFS[*]}; the tests use" \
                 "their own Python references" >&2
        fi
    fi
fi
echo "build_realworld.sh: ${names[*]} -> $out" >&2
