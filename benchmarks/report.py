"""Turn raw worker results into the summary figures and the printed tables.

Overhead is a ratio to the unprofiled run *of the same round*, because
machines drift by tens of percent between processes; medians over rounds with
min and max show how much of a difference is real.
"""

from __future__ import annotations

import random
import statistics

FIDELITY_REFERENCES = ("floor", "fake-floor")
PAIRED_NOTE = ("A/B rows: both profilers in one process, measured windows alternating (A B B A ...); "
               "their time / floor is the median over all window pairs of A's time over B's")
FLOOR = "floor"
CI_MIN_ROUNDS = 10  # fewer rounds: no interval is printed


def first_line(text) -> str:
    for line in str(text or "").splitlines():
        if line.strip():
            return line.strip()
    return "unknown error"


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def median_ci(values, level=0.9, draws=4000, seed=0):
    """Bootstrap interval of the median (seeded: the same figures give the same
    interval).  Single rounds spread by tens of percent between processes, so the
    interval, not the median alone, says whether a target is met."""
    values = [v for v in values if v is not None]
    return _bootstrap_median([[v] for v in values], level, draws, seed)


def median_ci_by_round(groups, level=0.9, draws=4000, seed=0):
    """Bootstrap interval of the median of A/B window pairs, drawing whole rounds: the pairs of one round share
    a process and the machine's state then, so drawing pairs one by one (median_ci) reads them as more
    independent than they are. None under CI_MIN_ROUNDS rounds (a pooled report, merge.py, has enough)."""
    return _bootstrap_median([g for g in groups if g], level, draws, seed)


def _bootstrap_median(groups, level, draws, seed):
    """The median's interval, each draw taking len(groups) groups with replacement; None under CI_MIN_ROUNDS."""
    if len(groups) < CI_MIN_ROUNDS:
        return None
    rng = random.Random(seed)
    meds = sorted(statistics.median([v for g in rng.choices(groups, k=len(groups)) for v in g]) for _ in range(draws))
    tail = int(draws * (1 - level) / 2)
    return meds[tail], meds[draws - 1 - tail]


def _index(runs):
    """(round, workload, profiler) -> run."""
    return {(r["round"], r["workload"], r["profiler"]): r for r in runs}


def summarize(runs: list[dict], plan: dict) -> dict:
    """Per workload and profiler: ratio median/min/max, size, finalize, RSS, errors."""
    idx = _index(runs)
    rounds = sorted({r["round"] for r in runs})
    out = {}
    for workload, wplan in plan.items():
        cells = {}
        floor = next((p for p in FIDELITY_REFERENCES if p in wplan.get("profilers", [])), FLOOR)
        for prof in wplan.get("profilers", []):
            ratios, floor_ratios, step_ratios, ok_runs, errors, pair_rounds = [], [], [], [], [], []
            for rnd in rounds:
                run = idx.get((rnd, workload, prof))
                if run is None:
                    continue
                if not run.get("ok"):
                    errors.append(run.get("error") or "unknown error")
                    continue
                ok_runs.append(run)
                base = idx.get((rnd, workload, "none"))
                if base and base.get("ok") and base.get("per_iter_s") and run.get("per_iter_s"):
                    ratios.append(run["per_iter_s"] / base["per_iter_s"])
                if run.get("paired_ratios"):  # an in-process A/B: its own window pairs, not another process
                    floor_ratios.extend(run["paired_ratios"])
                    pair_rounds.append(run["paired_ratios"])
                    continue
                ref = idx.get((rnd, workload, floor))
                if prof not in ("none", floor) and ref and ref.get("ok") and ref.get("per_iter_s") \
                        and run.get("per_iter_s"):
                    floor_ratios.append(run["per_iter_s"] / ref["per_iter_s"])
                    if run.get("step_median_s") and ref.get("step_median_s"):
                        step_ratios.append(run["step_median_s"] / ref["step_median_s"])
            if not ok_runs and not errors and wplan.get("error"):
                errors = ["not run: workload failed (see above)"]
            cell = {
                "runs": len(ok_runs), "failed": len(errors),
                "error": first_line(errors[0]) if errors else None,
                "ratios": ratios,
                "ratio_median": _median(ratios), "ratio_min": min(ratios) if ratios else None,
                "ratio_max": max(ratios) if ratios else None,
                # paired with the floor of the same round: the cost above what any CUPTI profiler pays
                "floor_ratios": floor_ratios, "floor_ratio_median": _median(floor_ratios),
                "floor_ratio_min": min(floor_ratios) if floor_ratios else None,
                "floor_ratio_max": max(floor_ratios) if floor_ratios else None,
                "floor_ratio_ci90": median_ci(floor_ratios),
                "floor_ratio_ci90_rounds": median_ci_by_round(pair_rounds),  # A/B rows, 10 rounds and more
                # the same with each run's median single step: blind to a few long interruptions
                # (a full GC, the host stealing the core), which the window mean above counts
                "step_floor_ratios": step_ratios, "step_floor_ratio_median": _median(step_ratios),
                "gc_ms": _median([r["gc_s"] * 1e3 for r in ok_runs if r.get("gc_s") is not None]),
                "per_iter_ms": _median([r.get("per_iter_s", 0) * 1e3 for r in ok_runs]),
                "profile_bytes": _median([r.get("profile_bytes") for r in ok_runs]),
                "finalize_ms": _median([r["finalize_s"] * 1e3 for r in ok_runs if r.get("finalize_s") is not None]),
                # runs whose finalize was killed after the measurement: the wall time it had by then
                "finalize_killed_s": [r["finalize_killed_s"] for r in ok_runs if r.get("finalize_killed_s")],
                "rss_mb": _median([r.get("rss_mb") for r in ok_runs]),
            }
            cells[prof] = cell
        out[workload] = cells
    return out


def fidelity(runs: list[dict], plan: dict) -> list[dict]:
    """Kernel count and GPU time each kernel-reporting profiler saw vs the floor, same round."""
    idx = _index(runs)
    rounds = sorted({r["round"] for r in runs})
    rows = []
    for workload, wplan in plan.items():
        profs = wplan.get("profilers", [])
        ref = next((p for p in FIDELITY_REFERENCES if p in profs), None)
        if ref is None:
            continue
        for prof in profs:
            if prof == ref or prof in FIDELITY_REFERENCES:
                continue
            pairs = []
            for rnd in rounds:
                a, b = idx.get((rnd, workload, prof)), idx.get((rnd, workload, ref))
                # an A/B run's count is its last window's, comparable only where that is as long
                if a and b and a.get("ok") and b.get("ok") and a.get("kernel_count") is not None \
                        and b.get("kernel_count") is not None and a.get("iters") == b.get("iters"):
                    pairs.append((a, b))
            if not pairs:
                continue  # profiler reports no kernels, or never ran beside a working floor
            count_d = [_pct(a["kernel_count"], b["kernel_count"]) for a, b in pairs]
            time_d = [_pct(a.get("gpu_time_ns"), b.get("gpu_time_ns")) for a, b in pairs]
            last_a, last_b = pairs[-1]
            rows.append({
                "workload": workload, "profiler": prof, "reference": ref, "rounds": len(pairs),
                "kernels": last_a["kernel_count"], "reference_kernels": last_b["kernel_count"],
                "count_diff_pct_median": _median(count_d),
                "count_diff_pct_maxabs": max((abs(d) for d in count_d if d is not None), default=None),
                "time_diff_pct_median": _median(time_d),
                "time_diff_pct_maxabs": max((abs(d) for d in time_d if d is not None), default=None),
                "exact_count_rounds": sum(1 for a, b in pairs if a["kernel_count"] == b["kernel_count"]),
                "dropped": max(int(b.get("dropped") or 0) for _, b in pairs),
            })
    return rows


def _pct(value, ref):
    if value is None or not ref:
        return None
    return (value - ref) / ref * 100.0


# ----------------------------------------------------------------- rendering

def _fmt_bytes(n):
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0


def _fmt(v, spec, none="-"):
    return none if v is None else format(v, spec)


def overhead_cell(cell: dict) -> str:
    if cell["ratio_median"] is None:
        if cell["error"]:
            return f"error: {cell['error']}"
        return "n/a (no unprofiled run)"
    text = f"{cell['ratio_median']:.3f} [{cell['ratio_min']:.3f}-{cell['ratio_max']:.3f}]"
    if cell["failed"]:
        text += f" ({cell['failed']} failed: {cell['error']})"
    return text


def floor_cell(cell: dict) -> str:
    if cell.get("floor_ratio_median") is None:
        return "-"
    text = f"{cell['floor_ratio_median']:.3f} [{cell['floor_ratio_min']:.3f}-{cell['floor_ratio_max']:.3f}]"
    ci, by_round = cell.get("floor_ratio_ci90"), cell.get("floor_ratio_ci90_rounds")
    if by_round:
        return text + f" (90% CI {ci[0]:.3f}-{ci[1]:.3f}; drawing rounds {by_round[0]:.3f}-{by_round[1]:.3f})"
    return text + (f" (90% CI {ci[0]:.3f}-{ci[1]:.3f})" if ci else "")


def finalize_cell(cell: dict) -> str:
    text = _fmt(cell["finalize_ms"], ".1f")
    killed = cell.get("finalize_killed_s") or []
    if killed:
        cut = f"killed after > {min(killed):.0f} s" + (f" in {len(killed)} runs" if len(killed) > 1 else "")
        text = cut if cell["finalize_ms"] is None else f"{text}; {cut}"
    return text


def _clip(s: str, width: int) -> str:
    return s if len(s) <= width else s[: width - 3] + "..."


def _table_rows(summary, plan):
    """(workload header, rows of string cells) per workload."""
    blocks = []
    for workload, cells in summary.items():
        wplan = plan.get(workload, {})
        base = cells.get("none", {})
        head = f"{workload}: K={wplan.get('iters', '?')} iters after {wplan.get('warmup', '?')} warm-up"
        if base.get("per_iter_ms") is not None:
            head += f", unprofiled {base['per_iter_ms']:.2f} ms/iter"
        if wplan.get("kernels_per_step"):
            head += f", {wplan['kernels_per_step']} kernels/iter"
        if wplan.get("error"):
            head += f" -- error: {first_line(wplan['error'])}"
        rows = []
        for prof, cell in cells.items():
            rows.append([prof, overhead_cell(cell), floor_cell(cell), _fmt(cell.get("step_floor_ratio_median"), ".3f"),
                         _fmt(cell.get("gc_ms"), ".1f"), _fmt_bytes(cell["profile_bytes"]),
                         finalize_cell(cell), _fmt(cell["rss_mb"], ".0f"), str(cell["runs"])])
        blocks.append((head, rows))
    return blocks


OVERHEAD_HEAD = ["profiler", "time / unprofiled: median [min-max]", "time / floor (median's bootstrap CI)", "step median / floor",
                 "GC ms in window", "profile", "finalize ms", "peak RSS MB", "runs"]
FIDELITY_HEAD = ["workload", "profiler", "kernels (ref)", "count diff % (max abs)", "GPU time diff % (max abs)",
                 "exact rounds", "ref dropped"]


def _fidelity_rows(rows):
    out = []
    for r in rows:
        out.append([r["workload"], r["profiler"], f"{r['kernels']} ({r['reference_kernels']})",
                    f"{_fmt(r['count_diff_pct_median'], '+.3f')} ({_fmt(r['count_diff_pct_maxabs'], '.3f')})",
                    f"{_fmt(r['time_diff_pct_median'], '+.2f')} ({_fmt(r['time_diff_pct_maxabs'], '.2f')})",
                    f"{r['exact_count_rounds']}/{r['rounds']}", str(r["dropped"])])
    return out


def _plain(head, rows, width=70):
    rows = [[_clip(c, width) for c in row] for row in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
    return [line(head), line(["-" * w for w in widths])] + [line(r) for r in rows]


def render_text(summary, fid_rows, plan, meta) -> str:
    lines = [f"Proton overhead benchmark -- {meta.get('title', '')}".rstrip(" -"), ""]
    for head, rows in _table_rows(summary, plan):
        lines.append(head)
        lines += ["  " + x for x in _plain(OVERHEAD_HEAD, rows)]
        lines.append("")
    lines.append("Fidelity: kernels and GPU time seen vs the bare-CUPTI floor in the same round")
    if fid_rows:
        lines += ["  " + x for x in _plain(FIDELITY_HEAD, _fidelity_rows(fid_rows))]
    else:
        lines.append("  (no pair of kernel-reporting profiler and floor succeeded in the same round)")
    for note in _notes(summary, meta):
        lines.append(f"note: {note}")
    return "\n".join(lines) + "\n"


def _notes(summary, meta) -> list[str]:
    paired = any("/" in prof for cells in summary.values() for prof in cells)
    return ([PAIRED_NOTE] if paired else []) + list(meta.get("notes", []))


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|")


def _md(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(_md_escape(_clip(c, 120)) for c in row) + " |" for row in rows]
    return out


def render_markdown(summary, fid_rows, plan, meta) -> str:
    lines = [f"## Proton overhead benchmark", ""]
    if meta.get("title"):
        lines += [meta["title"], ""]
    for head, rows in _table_rows(summary, plan):
        lines += [f"### {head}", ""] + _md(OVERHEAD_HEAD, rows) + [""]
    lines += ["### Fidelity vs the bare-CUPTI floor (same round)", ""]
    lines += _md(FIDELITY_HEAD, _fidelity_rows(fid_rows)) if fid_rows else ["(no data)"]
    lines.append("")
    for note in _notes(summary, meta):
        lines.append(f"- {note}")
    return "\n".join(lines) + "\n"
