"""Blocks of RISC-V transactions proven (above :mod:`prover.programs`: a block's
transactions are programs): :class:`.prover.TxBlockProver` and the block proof and its
verification (:mod:`.proof`)."""
