"""Test-session set-up.

The whole suite runs with numba's CUDA simulator on, so that backend ``sim`` runs the
device kernels as Python; it must be switched on before anything imports numba.cuda.
The PTX compile check runs in a subprocess with the simulator off (test_ptx.py).

Post-mortems written by the fault tests go to a session temporary directory
(``PROVER_POSTMORTEM_DIR``, unless already set), never into the checkout nor the
user's state directory.  ``STEADFAST_COMPILE_AHEAD`` is off by default in the session
(a cold first CLI test would start prover/cli/compile_ahead.py's helper process).
"""
import atexit
import os
import shutil
import tempfile

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
# no compile-ahead helper process behind the CLI tests' in-process proofs on a cold cache
# (tests/test_compile_ahead.py turns it on in its own subprocess)
os.environ.setdefault("STEADFAST_COMPILE_AHEAD", "0")
if not os.environ.get("PROVER_POSTMORTEM_DIR"):
    _PM_DIR = tempfile.mkdtemp(prefix="steadfast-test-postmortems-")
    os.environ["PROVER_POSTMORTEM_DIR"] = _PM_DIR
    atexit.register(shutil.rmtree, _PM_DIR, True)

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("ci", deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
