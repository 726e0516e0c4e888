"""Ordinary C programs on the machine (issue #37, docs/rv32.md "C programs (picolibc)"):
picolibc under guests/libc/ (crt0.S, syscalls.c, rv32.ld) and the compile command
scripts/rv32-cc.

Each program is built with scripts/rv32-cc and run on the machine (steadfast.rv32.execute,
both engines) and under qemu-riscv32 (Linux's own loader and system calls): the same
stdout and exit code (and stderr where the program writes one), and a Python model of
guests/libc/demo.c agrees; the demo is proved and verified at a small size.  Also: the
heap bound (ENOMEM), abort/assert/exit/_exit, constructors, destructors and TLS, a system
call the machine does not have (ExecutionError kind "syscall", never a proof), and an
rv32imc ELF's refusal ("build with -march=rv32im").

Skips with a reason where riscv64-unknown-elf-gcc or picolibc-riscv64-unknown-elf
(Debian packages; .ci/run installs them as root) or qemu-riscv32 are missing.

WEAK PARAMETERS: the one proof uses 6 queries and verifies with min_security_bits=0.
"""
import math
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from steadfast import rv32
from steadfast.rv32 import ElfError, ExecutionError, execute, load_elf

ROOT = Path(__file__).resolve().parents[1]
RV32_CC = ROOT / "scripts" / "rv32-cc"
DEMO_C = ROOT / "guests" / "libc" / "demo.c"
GCC = shutil.which("riscv64-unknown-elf-gcc")
QEMU = shutil.which("qemu-riscv32")
HAVE_PICOLIBC = GCC is not None and os.path.isfile(subprocess.run(
    [GCC, "-print-file-name=picolibc.specs"], capture_output=True, text=True).stdout.strip())

needs_cc = pytest.mark.skipif(
    not HAVE_PICOLIBC,
    reason="riscv64-unknown-elf-gcc with picolibc not installed "
           "(apt-get install gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf)")
needs_qemu = pytest.mark.skipif(QEMU is None,
                                reason="qemu-riscv32 not installed (apt-get install qemu-user)")
pytestmark = needs_cc


def cc(out: Path, *args, cwd=None) -> Path:
    """scripts/rv32-cc ARGS -o OUT (the build must succeed, warnings-free with -Werror)."""
    p = subprocess.run(["bash", str(RV32_CC), *map(str, args), "-o", str(out)], cwd=cwd,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return out


def qemu(elf: Path, data: bytes):
    p = subprocess.run([QEMU, str(elf)], input=data, capture_output=True, timeout=60)
    return p.stdout, p.stderr, p.returncode


def machine(elf: Path, data: bytes, **kw):
    ex = execute(load_elf(elf), input=data, **kw)
    return ex.output, ex.stderr, ex.exit_code


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    return tmp_path_factory.mktemp("libc")


@pytest.fixture(scope="module")
def demo(build):
    return cc(build / "demo.elf", "-O2", "-Wall", "-Wextra", "-Werror", DEMO_C)


def demo_model(data: bytes):
    """guests/libc/demo.c in Python: (stdout, stderr, exit code)."""
    words, total, tokens = [], 0, 0
    for tok in data.decode().split():
        if tok.isalpha() and tok.isascii():
            words.append(tok)
        else:
            body = tok[1:] if tok[:1] in "+-" else tok
            if not (body.isdigit() and body.isascii()) or not -2**63 <= int(tok) < 2**63:
                return b"", f"demo: bad token '{tok}'\n".encode(), 2
            total += int(tok)
        tokens += 1
    uniq = sorted(set(words))
    out = f"tokens: {tokens}\nwords: {len(uniq)}\n" + "".join(w + "\n" for w in uniq)
    out += (f"sum = {total}\nsqrt(|sum|) = {math.sqrt(abs(total)):.6f}\n"
            f"sin(sum) = {math.sin(total):.6f}\n")
    return out.encode(), b"", tokens & 255


DEMO_INPUTS = [
    b"",
    b"the quick brown fox 12 -5\njumps over the lazy dog 1000000\n",
    b"no newline at the end 7 8",                       # fgets' partial last line
    b"a 1 b? c\n",                                        # a bad token: longjmp, exit 2
    b"+9223372036854775807 overflow 9223372036854775808\n",     # ERANGE from strtoll
    (b"alpha beta gamma delta " * 10 + b"123456789 -42\n") * 30,  # past the 4 KiB buffer
]


@pytest.mark.parametrize("i", range(len(DEMO_INPUTS)))
def test_demo_machine_model_and_qemu(demo, i):
    """printf, malloc/realloc/free, strdup/strtok/strcmp, qsort, strtoll/errno,
    setjmp/longjmp, sqrt/sin, stdin read in lines: the machine's stdout, stderr and exit
    code are the model's, and qemu-riscv32's."""
    data = DEMO_INPUTS[i]
    got = machine(demo, data)
    assert got == demo_model(data)
    if QEMU:
        assert qemu(demo, data) == got


def test_demo_engines_agree(demo):
    """The reference interpreter (engine="python") runs the same program to the same
    cycle count, registers and outputs."""
    prog = load_elf(demo)
    data = DEMO_INPUTS[1]
    a, b = execute(prog, data), execute(prog, data, engine="python")
    assert (a.cycles, a.exit_code, a.output, a.stderr, a.pc) == \
           (b.cycles, b.exit_code, b.output, b.stderr, b.pc)
    assert list(a.regs) == list(b.regs)


def test_demo_proved_and_verified(demo):
    """The demo is proved (small parameters) and the proof verifies with its output and
    exit code."""
    from steadfast.prover.api import Prover, ProverConfig, verify
    data = DEMO_INPUTS[1]
    expected_out, _, expected_code = demo_model(data)
    proof = Prover(ProverConfig(backend="host", num_queries=6, pow_bits=1)).prove_program(
        demo, data, max_cycles=1 << 16)
    assert (proof.exit_code, proof.output) == (expected_code, expected_out)
    res = verify(proof, elf=demo, input=data, min_security_bits=0)
    assert (res.exit_code, res.output) == (expected_code, expected_out)


EDGES_C = r"""
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static _Thread_local int tls_init = 5;      /* .tdata */
static _Thread_local int tls_zero;          /* .tbss */
static int zeroed[300];                     /* .bss, zeroed by crt0.S */

__attribute__((constructor)) static void ctor(void) { printf("ctor "); }
__attribute__((destructor)) static void dtor(void) { printf(" dtor"); }
static void at_exit(void) { printf(" atexit"); }

int main(int argc, char **argv)
{
    int c = getchar();
    atexit(at_exit);
    printf("mode %c argc %d argv0 %p", c, argc, (void *)argv[0]);
    switch (c) {
    case 'a': assert(c == 'b'); break;
    case 'A': abort();
    case 'e': exit(7);
    case 'x': _exit(9);                 /* buffered stdout is lost, as on Linux */
    case 'h': {                         /* the heap: exactly __heap_size, then ENOMEM */
        size_t n = 0;
        while (sbrk(4096) != (void *)-1)
            n += 4096;
        printf(" heap %zu errno %d", n, errno);
        errno = 0;
        void *p = sbrk(16);
        printf(" more %d errno %d", p == (void *)-1, errno);
        break;
    }
    case 'm': {                         /* malloc past the heap */
        errno = 0;
        void *big = malloc((size_t)1 << 30);
        printf(" big %d errno %d", big == NULL, errno);
        void *small = malloc(100);
        printf(" small %d", small != NULL);
        free(small);
        break;
    }
    case 'o': {                         /* no files, no clock */
        errno = 0;
        time_t t = time(NULL);
        printf(" time %ld errno %d", (long)t, errno);
        errno = 0;
        FILE *f = fopen("x", "r");
        printf(" fopen %d errno %d", f == NULL, errno);
        printf(" write3 %d errno %d", (int)write(3, "x", 1), errno);
        printf(" read1 %d errno %d", (int)read(1, &c, 1), errno);
        break;
    }
    case 't': {                         /* TLS and .bss */
        int sum = 0;
        for (int i = 0; i < 300; i++)
            sum += zeroed[i];
        tls_zero += 2;
        printf(" tls %d %d bss %d", tls_init++, tls_zero, sum);
        printf(" %d", tls_init);
        break;
    }
    case 'E':
        fprintf(stderr, "err line 1\npartial");
        break;
    }
    return 300;                         /* the exit code is 300 mod 256 = 44 */
}
"""

EDGES = {  # mode -> (stdout, stderr or None = not compared, exit code)
    "a": (b"", None, 134),               # abort: no flush (the buffered "ctor mode a" is lost)
    "A": (b"", b"", 134),
    "e": (b"ctor mode e argc 0 argv0 0 atexit dtor", b"", 7),
    "x": (b"", b"", 9),
    "h": (b"ctor mode h argc 0 argv0 0 heap 65536 errno 12 more 1 errno 12 atexit dtor",
          b"", 44),
    "m": (b"ctor mode m argc 0 argv0 0 big 1 errno 12 small 1 atexit dtor", b"", 44),
    "o": (b"ctor mode o argc 0 argv0 0 time -1 errno 88 fopen 1 errno 88 write3 -1 errno 9"
          b" read1 -1 errno 9 atexit dtor", b"", 44),
    "t": (b"ctor mode t argc 0 argv0 0 tls 5 2 bss 0 6 atexit dtor", b"", 44),
    "E": (b"ctor mode E argc 0 argv0 0 atexit dtor", b"err line 1\npartial", 44),
}


@pytest.fixture(scope="module")
def edges(build):
    src = build / "edges.c"
    src.write_text(EDGES_C)
    return cc(build / "edges.elf", "-O2", "-Wall", src, "-Wl,--defsym=__heap_size=0x10000")


@pytest.mark.parametrize("mode", sorted(EDGES))
def test_libc_edges(edges, mode):
    """exit codes (main's return mod 256, exit, _exit, abort/assert = 128 + SIGABRT),
    stdout flushed by exit() after the atexit handlers and destructors, the heap bound
    (a 64 KiB heap here: sbrk gives exactly that, then ENOMEM; malloc returns NULL),
    ENOSYS for files and clocks, EBADF for other fds, .tdata/.tbss/.bss, stderr (fd 2,
    line-buffered, flushed at exit): machine == expected == qemu."""
    want_out, want_err, want_code = EDGES[mode]
    out, err, code = machine(edges, mode.encode())
    assert (out, code) == (want_out, want_code)
    if want_err is not None:
        assert err == want_err
    else:
        assert b'assertion "c == \'b\'" failed' in err
    if QEMU:
        q = qemu(edges, mode.encode())
        assert (q[0], q[2]) == (out, code) and q[1] == err


def test_unknown_system_call_stops_with_its_number(build):
    """A system call the machine does not have (brk, 214, which Linux has) stops the run:
    ExecutionError kind "syscall" naming the number; prove refuses (no proof)."""
    from steadfast.prover.api import Prover, ProverConfig, UnprovableProgram
    src = build / "brk.c"
    src.write_text(r"""
#include <stdio.h>
int main(void)
{
    printf("before\n");
    fflush(stdout);
    register long a0 __asm__("a0") = 0;
    register long a7 __asm__("a7") = 214;
    __asm__ volatile("ecall" : "+r"(a0) : "r"(a7) : "memory");
    printf("after\n");
    return 0;
}
""")
    elf = cc(build / "brk.elf", "-O2", src)
    with pytest.raises(ExecutionError) as ei:
        execute(load_elf(elf))
    assert ei.value.kind == "syscall"
    assert "unknown system call number 214 (0x000000d6)" in str(ei.value)
    with pytest.raises(UnprovableProgram, match="unknown system call number 214"):
        Prover(ProverConfig(backend="host", num_queries=6, pow_bits=1)).prove_program(elf, b"")


def test_compressed_elf_says_build_with_rv32im(build):
    """An ELF built with compressed instructions (-march=rv32imc, what a plain rv32
    toolchain default adds) is refused by load_elf and by the prove command with
    "build with -march=rv32im"; the toolchain's own default (rv64) names ELFCLASS64."""
    src = build / "rvc.c"
    src.write_text('#include <stdio.h>\nint main(void) { puts("hi"); return 0; }\n')
    elf = cc(build / "rvc.elf", "-march=rv32imc", src)
    with pytest.raises(ElfError) as ei:
        load_elf(elf)
    assert ei.value.field == "e_flags" and "build with -march=rv32im" in str(ei.value)
    prove = ROOT / ".venv" / "bin" / "prove"
    if prove.exists():
        p = subprocess.run([str(prove), str(elf)], capture_output=True, text=True, timeout=120)
        assert p.returncode != 0
        assert "EF_RISCV_RVC" in p.stderr and "build with -march=rv32im" in p.stderr
    bare = build / "bare.c"
    bare.write_text('void _start(void) { for (;;) __asm__ volatile("ecall"); }\n')
    rv64 = build / "rv64.elf"
    subprocess.run([GCC, "-nostdlib", "-static", "-o", str(rv64), str(bare)], check=True)
    with pytest.raises(ElfError) as ei:
        load_elf(rv64)
    assert ei.value.field == "EI_CLASS" and "ELFCLASS64" in str(ei.value)


def test_rv32_cc_passes_options_through(build):
    """-I, -D, -c, -L and -l pass through: an archive built with rv32-cc -c and ar is
    linked with -L/-l; the build is reproducible (same bytes from another directory)."""
    inc = build / "inc"
    inc.mkdir(exist_ok=True)
    (inc / "twice.h").write_text("int twice(int);\n")
    (build / "twice.c").write_text("#include <twice.h>\nint twice(int x) { return FACTOR * x; }\n")
    obj = build / "twice.o"
    p = subprocess.run(["bash", str(RV32_CC), "-O2", f"-I{inc}", "-DFACTOR=2", "-c",
                        str(build / "twice.c"), "-o", str(obj)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    ar = shutil.which("riscv64-unknown-elf-ar")
    if ar is None:
        pytest.skip("riscv64-unknown-elf-ar not installed")
    subprocess.run([ar, "rcs", str(build / "libtwice.a"), str(obj)], check=True)
    main = build / "usetwice.c"
    main.write_text('#include <stdio.h>\n#include <twice.h>\n'
                    'int main(void) { printf("%d\\n", twice(21)); return twice(3); }\n')
    elf = cc(build / "usetwice.elf", "-O2", f"-I{inc}", main, f"-L{build}", "-ltwice")
    assert machine(elf, b"") == (b"42\n", b"", 6)
    other = build / "elsewhere"
    other.mkdir(exist_ok=True)
    again = cc(other / "usetwice.elf", "-O2", f"-I{inc}", main, f"-L{build}", "-ltwice",
               cwd=other)
    assert again.read_bytes() == elf.read_bytes()


def test_rv32_cc_says_what_is_missing(tmp_path):
    """No compiler: exit 2 naming the package; a compiler without picolibc: exit 2 naming
    picolibc-riscv64-unknown-elf."""
    p = subprocess.run(["bash", str(RV32_CC), "x.c", "-o", "x.elf"], capture_output=True,
                       text=True, env={**os.environ, "RV32_CC": str(tmp_path / "no-gcc")})
    assert p.returncode == 2 and "gcc-riscv64-unknown-elf" in p.stderr
    fake = tmp_path / "fake-gcc"
    fake.write_text("#!/bin/sh\necho picolibc.specs\n")     # -print-file-name: not found
    fake.chmod(0o755)
    p = subprocess.run(["bash", str(RV32_CC), "x.c", "-o", "x.elf"], capture_output=True,
                       text=True, env={**os.environ, "RV32_CC": str(fake)})
    assert p.returncode == 2 and "picolibc-riscv64-unknown-elf" in p.stderr


def test_image_within_the_machine_limits(demo):
    """The demo's layout: code at 0x10000, the heap (16 MiB by default) inside the data
    segment's memory size, clear of the stack region; the entry point is _start."""
    prog = load_elf(demo)
    segs = sorted(prog.segments, key=lambda s: s.address)
    assert segs[0].address == 0x10000 and len(segs) == 2
    data = segs[-1]
    assert len(data.data) >= 16 << 20
    assert data.address + len(data.data) <= rv32.abi.STACK_REGION_START
