#!/usr/bin/env bash
# Build the rv32im guest programs (guests/*.c) into guests/bin/<name>.elf, and the examples'
# copies (examples/hello.elf, the README's program; hello, transfer and merkle -- ELF and
# C source -- for the block examples/block.json), with fixed flags (byte-reproducible for
# one compiler).
#
#   scripts/build_guests.sh            build into guests/bin/ and examples/
#   scripts/build_guests.sh --check    build into a temporary folder and compare the bytes
#                                      with the committed ELFs (guests/bin/ and examples/;
#                                      and examples/*.c with guests/*.c);
#                                      exit 1 naming the ones that differ (or are missing)
#
# Compiler: Debian's riscv64-unknown-elf-gcc (package gcc-riscv64-unknown-elf); override
# with CC=.  No libc and no libgcc are linked: a guest needing a libgcc helper (64-bit
# division, soft float) fails to link, which is intended.
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C SOURCE_DATE_EPOCH=0

CC=${CC:-riscv64-unknown-elf-gcc}
if ! command -v "$CC" >/dev/null 2>&1; then
    echo "build_guests.sh: $CC not found (apt-get install gcc-riscv64-unknown-elf)" >&2
    exit 2
fi

CFLAGS=(
    -march=rv32im -mabi=ilp32 -O2 -std=c11
    -Wall -Wextra -Werror
    -ffreestanding -nostdlib -nostartfiles -static -fno-pic -fno-pie
    -fno-stack-protector -fno-asynchronous-unwind-tables -fno-unwind-tables
    -fno-tree-loop-distribute-patterns
    -ffunction-sections -fdata-sections
    "-ffile-prefix-map=$PWD=."
    -Wl,--gc-sections -Wl,--build-id=none -Wl,-T,guests/runtime/link.ld
    -Wl,-z,noexecstack
)
RUNTIME=(guests/runtime/crt0.S guests/runtime/rt.c)
EXAMPLES=(hello merkle transfer)    # ELF and C source copied into examples/ (examples/block.json)

check=0
case "${1:-}" in
    --check) check=1 ;;
    "") ;;
    *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

if [ "$check" = 1 ]; then
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
else
    out=guests/bin
    mkdir -p "$out"
fi

names=()
for src in $(ls guests/*.c | sort); do
    name=$(basename "$src" .c)
    names+=("$name")
    "$CC" "${CFLAGS[@]}" -o "$out/$name.elf" "${RUNTIME[@]}" "$src"
done

if [ "$check" = 0 ]; then
    mkdir -p examples
    for name in "${EXAMPLES[@]}"; do
        cp "guests/bin/$name.elf" "examples/$name.elf"
        cp "guests/$name.c" "examples/$name.c"
    done
    echo "built: ${names[*]} (guests/bin/*.elf; examples/: ${EXAMPLES[*]})"
    exit 0
fi

bad=()
for name in "${names[@]}"; do
    if ! cmp -s "$out/$name.elf" "guests/bin/$name.elf"; then
        bad+=("guests/bin/$name.elf")
    fi
done
for name in "${EXAMPLES[@]}"; do
    if ! cmp -s "$out/$name.elf" "examples/$name.elf"; then
        bad+=("examples/$name.elf")
    fi
    if ! cmp -s "guests/$name.c" "examples/$name.c"; then
        bad+=("examples/$name.c")
    fi
done
if [ "${#bad[@]}" -gt 0 ]; then
    echo "build_guests.sh --check: differs from a fresh build: ${bad[*]}" >&2
    exit 1
fi
echo "build_guests.sh --check: ${#names[@]} guests and ${#EXAMPLES[@]} examples identical to a fresh build"
