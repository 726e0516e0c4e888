"""End-to-end part of bench/device_check.py: proofs of blocks of RISC-V transactions (block
format 2, ``bench/make_block.py``'s generator: device_common.sized_block) on a device
backend against the host path, proof bytes compared, with speed-ups, peak VRAM and the
slowest stages."""
from __future__ import annotations

import time

from bench.device_common import PER_BIT, Ctx, VramPeak, sized_block, yn


def growth(k0: int, k1: int, per_bit: float | None = None) -> float:
    """Predicted t(2^k1) / t(2^k0) (``per_bit``: a measured factor per bit of k)."""
    f = 1.0
    for b in range(k0 + 1, k1 + 1):
        f *= per_bit if per_bit else PER_BIT.get(b, 1.4 if b < 11 else 2.45)
    return f


def _stage_note(r: dict) -> str:
    dev = r.get("device") or {}
    stage: dict = {}
    events: dict = {}
    for t in (dev.get("tables") or {}).values():
        for s, v in (t.get("stage_s") or {}).items():
            stage[s] = stage.get(s, 0.0) + v
        for s, v in (t.get("device_stage_ms") or {}).items():
            events[s] = events.get(s, 0.0) + v / 1e3
    src, d = (("CUDA events", events) if events else ("device stages", stage) if stage
              else ("rounds", r.get("rounds") or {}))
    top = sorted(d.items(), key=lambda kv: -kv[1])[:3]
    return f"{src}: " + ", ".join(f"{k} {v:.2f}s" for k, v in top) if top else ""


def _find(d, key):
    if isinstance(d, dict):
        if key in d and d[key]:
            return d[key]
        for v in d.values():
            got = _find(v, key)
            if got:
                return got
    return None


class E2E:
    """End-to-end proofs: device backend vs host on the same inputs, proof bytes compared."""

    def __init__(self, ctx: Ctx):
        self.ctx, self.runner = ctx, ctx.runner
        self.dev = ctx.args.e2e_backend or ctx.S.get("e2e_backend") or ctx.args.backend
        self.host_max_k = ctx.args.host_max_k
        self.provers: dict = {}
        self.hist: dict = {"host": [], self.dev: []}        # warm (k, seconds)
        self.broken = ""                                    # why the device backend is out
        self.details: dict = {}
        self.done_k: set = set()                            # sizes already compared
        ctx.report.extra["e2e"] = self.details

    def _measured(self, backend: str, run):
        """Run one proof; a device backend's memory pool is emptied first so that the
        sampled peak is this proof's."""
        dev = self.ctx.dev if backend != "host" else None
        if dev is not None:
            dev.free_all()
        t0 = time.perf_counter()
        with VramPeak(dev) as vp:
            res = run()
        res.setdefault("total_s", time.perf_counter() - t0)
        res["vram_peak"] = vp.delta
        return res

    def prove_block(self, block, backend: str, profile: str = "default") -> dict:
        from steadfast.prover.api import Prover, ProverConfig
        key = backend if profile == "default" else (backend, profile)
        if key not in self.provers:
            self.provers[key] = Prover(ProverConfig.for_profile(profile, backend=backend))

        def run():
            proof = self.provers[key].prove_block(block)
            st = proof.stats
            return dict(bytes=proof.to_bytes(), total_s=st.phases.get("total"),
                        prove_s=st.phases.get("prove"), rounds=st.rounds(), cycles=st.cycles,
                        device=st.counters.get("device"), tables={t.name: t.rows for t in st.tables})
        return self._measured(backend, run)

    def prove_example(self, backend: str) -> dict:
        # The simulator cannot prove a block in minutes (its BYTES table alone has 2^16
        # rows; even three 16-row tables take ~6 minutes), so `--e2e-k example` proves the
        # 8-row Fibonacci example through prover.core.prove: the same pipeline, one table.
        from steadfast.air import examples as ex
        from steadfast.prover import Params, Spans, prove
        from steadfast.prover.device.pipeline import PipelineConfig
        trace, pv = ex.fibonacci_trace(3)
        spans, stats = Spans(), []
        device = None if backend == "host" else PipelineConfig.from_env(backend)

        def run():
            proof = prove([trace], [ex.fibonacci_air()], [pv], Params(num_queries=8, pow_bits=2),
                          spans=spans, check=False, device=device, device_stats=stats)
            return dict(bytes=proof, rounds={k: v for k, v in spans.stats.by_round().items()
                                             if k != "table"}, cycles=0, tables={"fibonacci": 8},
                        device=stats[0].as_dict() if stats else None)
        res = self._measured(backend, run)
        res["prove_s"] = res["total_s"]
        return res

    def predict(self, backend: str, k: int | None):
        """(seconds, basis) for a proof of 2^k cycles from this run's warm proofs."""
        h = sorted(self.hist[backend])
        if not h or k is None:
            return 0.0, "no measurement"
        k0, t0 = h[-1]
        per_bit, basis = None, f"2^{k0} measured {t0:.1f}s x docs/benchmarks.md host scaling"
        if len(h) >= 2 and h[-2][0] >= 14 and k0 > h[-2][0]:
            per_bit = min(3.0, max(1.5, (t0 / h[-2][1]) ** (1.0 / (k0 - h[-2][0]))))
            basis = f"2^{k0} measured {t0:.1f}s x {per_bit:.2f}/bit (measured 2^{h[-2][0]}->2^{k0})"
        f = growth(k0, k, per_bit)
        return t0 * f, f"{basis} = x{f:.1f}"

    def _prove(self, backend: str, size: str, fn, k: int | None):
        """-> (status, result, note) of one proof, within the budget."""
        if backend != "host" and self.broken:
            return "skipped", None, self.broken
        if backend == "host" and k is not None and k > self.host_max_k:
            return "skipped", None, f"host proofs above 2^{self.host_max_k} are not run (--host-max-k)"
        pred, _ = self.predict(backend, k)
        st, res, note = self.runner.call(f"prove {backend} {size}", lambda: fn(backend), 1.25 * pred)
        if st == "ok" and k is not None:
            self.hist[backend].append((k, res["total_s"]))
        if st == "error" and backend != "host":
            self.broken = f"{backend} failed earlier ({note})"
        self.details.setdefault(size, {})[backend] = dict(
            status=st, note=note, predicted_s=pred,
            **{x: y for x, y in (res or {}).items() if x != "bytes"})
        return st, res, note

    def warmup(self, k: int) -> None:
        """Each backend twice at 2^k: the first run compiles, the second is warm."""
        block = sized_block(k)
        size = f"2^{k} cycles"
        runs, notes, failed = {}, [], False
        for backend in (self.dev, "host"):
            for i in (0, 1):
                st, res, note = self._prove(backend, f"{size} #{i}",
                                            lambda b: self.prove_block(block, b), k if i else None)
                if st != "ok":
                    notes.append(f"{backend} #{i} {st}: {note}")
                    failed = failed or st in ("error", "timeout")
                    break
                runs[(backend, i)] = res
        blobs = [v["bytes"] for v in runs.values()]
        both = {b for b, _ in runs} == {self.dev, "host"}
        ident = yn(all(x == blobs[0] for x in blobs)) if both else ("error" if failed else "skipped")
        warm = runs.get((self.dev, 1)) or runs.get((self.dev, 0))
        first = ", ".join(f"{b} {runs[(b, 0)]['total_s']:.1f}s" for b in (self.dev, "host")
                          if (b, 0) in runs)
        if ("host", 1) in runs:
            notes.insert(0, f"host warm {runs[('host', 1)]['total_s']:.2f}s")
        self.ctx.report.add(f"prove warm-up ({self.dev})", size, ident,
                            warm["total_s"] if warm else None, "", "",
                            "; ".join([f"{len(runs)} proofs" + (f"; first runs (compile): {first}"
                                                                if first else "")] + notes))

    def one(self, label: str, size: str, k: int | None, fn) -> None:
        """Device proof then host proof of one input (each if its prediction fits), one row."""
        add = self.ctx.report.add
        sd, rd, nd = self._prove(self.dev, size, fn, k)
        if rd is None:
            add(label, size, sd if sd in ("error", "timeout") else "skipped", note=f"{self.dev}: {nd}")
            return
        sh, rh, nh = self._prove("host", size, fn, k)
        t = rd["total_s"]
        rate = f"{rd['cycles'] / t:,.0f} cycles/s" if rd["cycles"] else ""
        if rh is not None:
            ident, ratio = yn(rh["bytes"] == rd["bytes"]), f"x{rh['total_s'] / t:.1f} vs host"
            notes = [f"host {rh['total_s']:.2f}s (prove {rh['prove_s']:.2f}s)"]
        else:                       # the identity was not checked: not a device failure
            ident, ratio = "skipped", ""
            est, basis = self.predict("host", k)
            notes = [f"host proof {sh} ({nh})"]
            if est:
                ratio = f"x{est / t:.1f} vs host (extrapolated)"
                notes.append(f"host ~{est:.0f}s EXTRAPOLATED from {basis}")
        notes.append(f"{self.dev} prove {rd['prove_s']:.2f}s, {len(rd['bytes']):,} B")
        dev = rd.get("device") or {}
        vram = [f"sampled {rd['vram_peak'] / 2**30:.2f} GiB" if rd.get("vram_peak") is not None
                else "sampled n/a" + (" (sim)" if self.ctx.dev.sim else "")]
        if dev.get("peak_device_bytes"):
            vram.append(f"ledger {dev['peak_device_bytes'] / 2**30:.2f} GiB")
        notes.append("peak VRAM " + ", ".join(vram))
        rec = sum(sum(v.values()) for v in (dev.get("recovery") or {}).values() if isinstance(v, dict))
        if rec:
            notes.append(f"{rec} recoveries")
        assisted = _find(dev, "host_assisted")
        if assisted:
            notes.append(f"host-assisted: {assisted}")
        notes.append(_stage_note(rd))
        add(label, size, ident, t, rate, ratio, "; ".join(n for n in notes if n),
            proof_bytes=len(rd["bytes"]))

    def first(self, k: int) -> None:
        """The first proof comparison of the run, right after the precompile and before any
        microbenchmark: one small real block, device backend vs host, proof bytes."""
        block = sized_block(k)
        self.one(f"prove block first ({self.dev})", f"2^{k} cycles", k,
                 lambda b: self.prove_block(block, b))
        self.done_k.add(k)

    def fastest(self, k: int) -> None:
        """The ``fastest`` profile (log_blowup 1, slots "cells-split": tables of up to 4
        instructions a row, their own constraint kernels, split chips) at 2^k, device then host, bytes
        compared.  Last in the run, within what is left of the budget; its times stay out
        of the ladder's predictions and a failure here does not stop the device proofs."""
        block, size = sized_block(k), f"2^{k} cycles"
        label, res = f"prove block fastest ({self.dev})", {}
        for b in (self.dev, "host"):
            st, r, note = self.runner.call(f"prove {b} fastest {size}",
                                           lambda b=b: self.prove_block(block, b, "fastest"))
            if st != "ok":
                self.ctx.report.add(label, size, st, note=f"{b}: {note}")
                return
            res[b] = r
        d, h = res[self.dev], res["host"]
        self.details.setdefault(f"{size} fastest", {}).update(
            {b: {x: y for x, y in r.items() if x != "bytes"} for b, r in res.items()})
        self.ctx.report.add(label, size, yn(d["bytes"] == h["bytes"]), d["total_s"],
                            f"{d['cycles'] / d['total_s']:,.0f} cycles/s" if d["cycles"] else "",
                            f"x{h['total_s'] / d['total_s']:.1f} vs host",
                            f"host {h['total_s']:.2f}s; {len(d['bytes']):,} B; "
                            + _stage_note(d), proof_bytes=len(d["bytes"]))

    def run(self, ladder, warm_k) -> None:
        if "example" in ladder:
            self.one("prove fibonacci", "1 table 2^3 rows", None, self.prove_example)
            return
        if warm_k and warm_k not in self.done_k:
            self.warmup(warm_k)
        for k in sorted({int(x) for x in ladder} - self.done_k):
            block = sized_block(k)
            self.one(f"prove block ({self.dev})", f"2^{k} cycles", k,
                     lambda b, blk=block: self.prove_block(blk, b))


# ----------------------------------------------------------------------------- main
