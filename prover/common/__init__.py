"""What every layer of the prover shares (the bottom layer; imports nothing of the prover):
the errors (:mod:`.errors`), the per-round / per-table timers (:mod:`.spans`), a proof's
statistics (:mod:`.stats`), the device timeline (:mod:`.timeline`) and the framed proof
file every proof kind writes (:mod:`.proof_file`)."""
