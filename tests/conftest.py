"""Test-session set-up.

The whole suite runs with numba's CUDA simulator on, so that backend ``sim`` runs the
device kernels as Python; it must be switched on before anything imports numba.cuda.
The PTX compile check runs in a subprocess with the simulator off (test_ptx.py).

Post-mortems written by the fault tests go to a session temporary directory
(``PROVER_POSTMORTEM_DIR``, unless already set), never into the checkout nor the
user's state directory.
"""
import atexit
import os
import shutil
import tempfile

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
if not os.environ.get("PROVER_POSTMORTEM_DIR"):
    _PM_DIR = tempfile.mkdtemp(prefix="steadfast-test-postmortems-")
    os.environ["PROVER_POSTMORTEM_DIR"] = _PM_DIR
    atexit.register(shutil.rmtree, _PM_DIR, True)

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("ci", deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
