"""The device pipeline (above :mod:`prover.core`): the tables' stages on a device
(:mod:`.pipeline`, :mod:`.stages`, :mod:`.engines`), residency and admission
(:mod:`.residency`, :mod:`.gate`, :mod:`.locks`), the join (:mod:`.join`), recovery from
OOMs, corruption and a lost device (:mod:`.recovery`, :mod:`.lost`, :mod:`.integrity`,
:mod:`.precheck`), XCHECK (:mod:`.xcheck`) and fault injection (:mod:`.faults`: the plan;
:mod:`.faulting`: the stages that inject it, made only under a plan).  Same bytes as the
host path, always."""
