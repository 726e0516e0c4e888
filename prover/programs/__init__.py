"""One RV32IM program proven (above :mod:`prover.engine`): :class:`.prover.ProgramProver`
(whole or in segments, :mod:`.segment_prover`), the proofs (:mod:`.proof`,
:mod:`.segment_proof`), the sizing report (:mod:`.report`) and the verification
(:mod:`.verify`)."""
