"""The engine that proves (above :mod:`prover.device`): a configuration resolved once
(:mod:`.config`: backend, VRAM budget, parameters), the process lock, timeout and cancel
(:mod:`.control`), and :class:`.prover_core.ProverCore` -- any AIRs through the host or
the device pipeline, with the self-check, its post-mortems and the statistics; the proofs
of your own AIRs (:mod:`.air_proof`).  It knows no machine: the programs and blocks
(:mod:`prover.programs`, :mod:`prover.blocks`) are built on it."""
