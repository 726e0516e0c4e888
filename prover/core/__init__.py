"""The protocol core (SPEC §4-5 on the host; imports only :mod:`prover.common` of the
prover): the rounds (:mod:`.rounds`), the per-table stages (:mod:`.stages`), the host
operations (:mod:`.hostops`), the Merkle commitments (:mod:`.commit`), the LDE tree
(:mod:`.ldetree`) and the linear :func:`.prove.prove`.  A device backend plugs in from
above (:mod:`prover.device`): ``prove(..., device=)`` calls ``device.run(statement)``."""
