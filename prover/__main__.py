"""``python -m steadfast.prover prove BLOCK.json ...`` and ``python -m steadfast.prover verify PROOF ...``
(the same commands as the ``prove`` / ``verify`` console scripts, ending the process the
same way: without the interpreter's final collection of numba's and the proof's objects,
a quarter of a second of a warm ``verify``)."""
import sys

from .cli import EXIT_USAGE, main_prove, main_verify
from .cli.common import skip_final_gc


def main(argv=None) -> int:
    """Run ``prove ...`` or ``verify ...`` (``argv``: default sys.argv[1:]) -> exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    commands = {"prove": main_prove, "verify": main_verify}
    if not argv or argv[0] not in commands:
        sys.stderr.write("usage: python -m steadfast.prover {prove,verify} ...  (see prove --help, "
                         "verify --help)\n")
        return EXIT_USAGE if argv[:1] not in (["-h"], ["--help"]) else 0
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    code = main()
    skip_final_gc()                 # the process ends here, as the console scripts' does
    sys.exit(code)
