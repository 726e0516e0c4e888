"""Test-session set-up.

The whole suite runs with numba's CUDA simulator on, so that backend ``sim`` runs the
device kernels as Python; it must be switched on before anything imports numba.cuda.
The PTX compile check runs in a subprocess with the simulator off (test_ptx.py).
"""
import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("ci", deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
