"""numba's import for the command line, without its optional YAML reader (issue #38 item 4).

``numba.core.config`` imports PyYAML (when installed) for one purpose: to read a
``.numba_config.yaml`` in the current directory, if there is one.  The import is ~10 ms of
every ``prove`` / ``verify`` process (yaml's reader and scanner modules), paid whether or
not such a file exists.  :func:`import_numba` imports numba with ``yaml`` hidden *only*
when no such file exists -- where numba would have read nothing from it -- and un-hides it
straight after, so a later ``import yaml`` in the process works as usual.  numba's
configuration is the same either way: its environment variables are read as always, and a
``.numba_config.yaml`` present at start is read by numba's own path (nothing is hidden
then).  A no-op when numba is already imported (a library caller's process) or yaml is.

Only the command line calls this (:func:`prover.cli.common.main`); ``import steadfast``
leaves numba's import alone.
"""
from __future__ import annotations

import os
import sys

_CONFIG_FILE = ".numba_config.yaml"     # numba.core.config._config_fname


def import_numba() -> bool:
    """Import numba, skipping its YAML import when it would read nothing with it; returns
    whether yaml was hidden (False: numba was already imported, yaml already loaded, or a
    config file is present)."""
    if "numba" in sys.modules or "yaml" in sys.modules or os.path.isfile(_CONFIG_FILE):
        import numba  # noqa: F401
        return False
    sys.modules["yaml"] = None          # `import yaml` raises ImportError while this stands
    try:
        import numba  # noqa: F401
    finally:
        if "yaml" in sys.modules and sys.modules["yaml"] is None:
            del sys.modules["yaml"]
    return True


__all__ = ["import_numba"]
