"""Parameter sweeps: a grid over one or two config keys, evaluated on tune and holdout.

Fast because of cached re-scoring: fusion, rerank and injection parameters leave the
cached candidates valid, so each grid point costs milliseconds per query. The best point
is chosen on the tune split only; its holdout score is reported beside it, so a
sweep cannot overfit the set it is judged on.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.yaml_safe import refuse_aliases, safe_load
from workbench.eval.engines import evaluator
from workbench.eval.golden import GoldenSet
from workbench.eval.measures import shown
from workbench.eval.run_record import RunRecord

# Latency differences below this share of the median p95 (and below 1 ms) are noise: on the
# 2-core machines here, identical configs measured p50 4.2-4.9 ms apart run to run (~15%).
LATENCY_NOISE_SHARE = 0.15
LATENCY_NOISE_MIN_MS = 1.0

ProgressFn = Callable[[int, int, str], None]


def parse_grid_arg(text: str) -> tuple[str, list[Any]]:
    """``"fusion.k=10,30,60"`` -> ``("fusion.k", [10, 30, 60])`` (values read as YAML)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or not raw.strip():
        raise ConfigError(f"expected --grid KEY=v1,v2,... (e.g. fusion.k=10,30,60); got {text!r}")
    values = []
    for part in raw.split(","):
        part = part.strip()
        if not part:
            continue
        refuse_aliases(part, f"--grid {key}")
        try:
            values.append(safe_load(part, f"--grid {key}"))
        except ConfigError:
            values.append(part)  # not YAML (e.g. an unbalanced quote): the text as typed
    return key, values


def expand_grid(base_cfg: EngineConfig, grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """All grid points (first key outermost), each checked against the config schema."""
    keys = list(grid)
    if not 1 <= len(keys) <= 2:
        raise ConfigError(f"a sweep takes 1 or 2 keys; got {len(keys)}: {', '.join(keys)}")
    for k in keys:
        if not list(grid[k]):
            raise ConfigError(f"--grid {k} has no values; give at least one, e.g. {k}=1,2")
        base_cfg.get(k)  # unknown keys fail here with the list of known ones
    points = [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*grid.values())]
    for p in points:
        base_cfg.with_overrides(p)  # invalid values fail before any evaluation
    return points


def with_current(values: list[Any], current: Any) -> list[Any]:
    """``values`` plus ``current`` when it is not among them (in order when numeric)."""
    if any(_same(v, current) for v in values):
        return values
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    if numeric and isinstance(current, int | float) and not isinstance(current, bool):
        return sorted([*values, current])
    return [*values, current]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return not isinstance(a, bool) and not isinstance(b, bool) and float(a) == float(b)
    return str(a).lower() == str(b).lower()


@dataclass(frozen=True)
class SweepPoint:
    values: dict[str, Any]
    config_hash: str
    mode: str
    tune: dict[str, float]
    holdout: dict[str, float]
    latency_p50: float
    latency_p95: float
    tune_queries: int
    holdout_queries: int

    def row(self, split: str = "tune") -> dict[str, Any]:
        """A flat row (CSV, tables): values, split measures, holdout measures, latency."""
        out: dict[str, Any] = dict(self.values)
        for m in shown("headline"):
            out[f"{split}_{m}"] = self.tune.get(m, 0.0)
        for m in shown("holdout"):
            out[f"holdout_{m}"] = self.holdout.get(m, 0.0)
        out["latency_p50"] = self.latency_p50
        out["latency_p95"] = self.latency_p95
        out["config_hash"] = self.config_hash
        return out


@dataclass(frozen=True)
class SweepResult:
    keys: tuple[str, ...]
    grid: dict[str, list[Any]]
    points: tuple[SweepPoint, ...]
    split: str
    base_hash: str
    best_index: int
    current: dict[str, Any] = field(default_factory=dict)  # the base config's values

    @property
    def best(self) -> SweepPoint:
        return self.points[self.best_index]

    @property
    def current_index(self) -> int | None:
        """The grid point equal to the config the sweep started from, if the grid has it."""
        for i, p in enumerate(self.points):
            if p.config_hash == self.base_hash:
                return i
        return None

    def latency_noise_ms(self) -> float:
        """The smallest p95 difference worth reading as real (see LATENCY_NOISE_SHARE)."""
        p95 = sorted(p.latency_p95 for p in self.points)
        median = p95[len(p95) // 2] if p95 else 0.0
        return max(LATENCY_NOISE_MIN_MS, LATENCY_NOISE_SHARE * median)

    def latency_within_noise(self) -> bool:
        """True when every point's p95 lies within the noise floor of every other."""
        p95 = [p.latency_p95 for p in self.points]
        return not p95 or max(p95) - min(p95) <= self.latency_noise_ms()

    def holdout_warning(self, measure: str = "mrr") -> str | None:
        """A warning when the best tune point is worse on holdout than the current value
        (or, without the current value in the grid, than the grid's best holdout score)."""
        hm = measure if measure in shown("holdout") else "mrr"
        best = self.best.holdout.get(hm, 0.0)
        ref_i = self.current_index
        if ref_i is not None:
            ref, what = self.points[ref_i].holdout.get(hm, 0.0), "the current value"
        else:
            ref_i = max(range(len(self.points)), key=lambda i: self.points[i].holdout.get(hm, 0.0))
            ref, what = self.points[ref_i].holdout.get(hm, 0.0), "another grid point"
        if ref_i == self.best_index or best >= ref - 1e-9:
            return None
        vals = ", ".join(f"{k}={v}" for k, v in self.points[ref_i].values.items())
        return (
            f"the best {self.split} point loses on holdout: holdout {hm} {best:.3f} vs "
            f"{ref:.3f} at {what} ({vals}); the gain may not generalise"
        )

    def rows(self) -> list[dict[str, Any]]:
        return [p.row(self.split) for p in self.points]

    def matrix(self, measure: str = "recall@5") -> list[list[float]]:
        """2-D sweeps: ``[i][j]`` = ``measure`` on the split at (key0[i], key1[j])."""
        if len(self.keys) != 2:
            raise ValueError("matrix() needs a 2-key sweep")
        k0, k1 = self.keys
        by = {(_key(p.values[k0]), _key(p.values[k1])): p for p in self.points}
        return [
            [by[(_key(a), _key(b))].tune.get(measure, 0.0) for b in self.grid[k1]]
            for a in self.grid[k0]
        ]

    def pareto(self, measure: str = "recall@5") -> list[int]:
        """Indices of points no other point beats on both ``measure`` and p95 latency."""
        out = []
        for i, p in enumerate(self.points):
            q, lat = p.tune.get(measure, 0.0), p.latency_p95
            dominated = any(
                (o.tune.get(measure, 0.0) >= q and o.latency_p95 <= lat)
                and (o.tune.get(measure, 0.0) > q or o.latency_p95 < lat)
                for o in self.points
            )
            if not dominated:
                out.append(i)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "keys": list(self.keys),
            "grid": self.grid,
            "split": self.split,
            "base_hash": self.base_hash,
            "rows": self.rows(),
            "best": {"index": self.best_index, **self.best.row(self.split)},
            "pareto": self.pareto(),
            "current": self.current,
            "current_index": self.current_index,
            "latency_noise_ms": round(self.latency_noise_ms(), 3),
            "latency_within_noise": self.latency_within_noise(),
            "holdout_warning": self.holdout_warning(),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2, default=str)


def _key(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


def best_index(points: Sequence[SweepPoint], measure: str = "recall@5") -> int:
    """Best on the tune split: highest ``measure``, then MRR, then lower p95, then grid order."""
    if not points:
        raise ValueError("no sweep points")
    order = sorted(
        range(len(points)),
        key=lambda i: (
            -round(points[i].tune.get(measure, 0.0), 12),
            -round(points[i].tune.get("mrr", 0.0), 12),
            points[i].latency_p95,
            i,
        ),
    )
    return order[0]


def _point(values: dict[str, Any], cfg: EngineConfig, mode: str, tune: RunRecord, hold: RunRecord):
    lat = tune.latency(mode)
    tm, hm = tune.means(mode), hold.means(mode)
    return SweepPoint(
        values=values,
        config_hash=cfg.hash,
        mode=mode,
        tune={m: float(tm.get(m, 0.0)) for m in shown("headline")},
        holdout={m: float(hm.get(m, 0.0)) for m in shown("holdout")},
        latency_p50=float(lat["p50"]),
        latency_p95=float(lat["p95"]),
        tune_queries=len(tune.for_mode(mode)),
        holdout_queries=len(hold.for_mode(mode)),
    )


def sweep(
    ws: Any,
    base_cfg: EngineConfig,
    grid: Mapping[str, Sequence[Any]],
    gs: GoldenSet,
    split: str = "tune",
    progress: ProgressFn | None = None,
    *,
    evaluator_for: Callable[[EngineConfig], Any] | None = None,
) -> SweepResult:
    """Evaluate ``base_cfg`` + each grid point on ``split`` and on the holdout.

    The current value of each key joins its grid when missing, so every sweep shows where
    the config stands now."""
    grid = {k: with_current(list(v), base_cfg.get(k)) for k, v in grid.items()}
    points = expand_grid(base_cfg, grid)
    if evaluator_for is None:

        def evaluator_for(c: EngineConfig) -> Any:
            return evaluator(ws, c)

    out = []
    ev = None
    for n, values in enumerate(points):
        if progress:
            progress(n, len(points), ", ".join(f"{k}={v}" for k, v in values.items()))
        cfg = base_cfg.with_overrides(values)
        mode = cfg.search.mode
        ev = evaluator_for(cfg)
        tune = ev.run(gs, cfg, modes=[mode], split=split)
        hold = tune if split == "holdout" else ev.run(gs, cfg, modes=[mode], split="holdout")
        out.append(_point(values, cfg, mode, tune, hold))
    if ev is not None and hasattr(getattr(ev, "cache", None), "save"):
        ev.cache.save()
    if progress:
        progress(len(points), len(points), "done")
    return SweepResult(
        keys=tuple(grid),
        grid={k: list(v) for k, v in grid.items()},
        points=tuple(out),
        split=split,
        base_hash=base_cfg.hash,
        best_index=best_index(out),
        current={k: base_cfg.get(k) for k in grid},
    )


def format_sweep(result: SweepResult) -> str:
    """Plain-text table (and, for 2 keys, a recall@5 matrix) plus the best point."""
    s = result.split
    cols = [*result.keys]
    head = [*cols, f"{s} R@5", f"{s} MRR", f"{s} Hit@5", f"{s} NDCG@10", "hold R@5", "hold MRR"]
    head += ["p50 ms", "p95 ms"]
    rows = []
    for i, p in enumerate(result.points):
        cells = [str(p.values[k]) for k in cols]
        cells += [f"{p.tune[m]:.3f}" for m in shown("headline")]
        cells += [f"{p.holdout[m]:.3f}" for m in shown("holdout")]
        cells += [f"{p.latency_p50:.1f}", f"{p.latency_p95:.1f}"]
        if i == result.best_index:
            cells[0] = "*" + cells[0]
        if i == result.current_index:
            cells[0] = "=" + cells[0]
        rows.append(cells)
    widths = [max(len(h), *(len(r[j]) for r in rows)) for j, h in enumerate(head)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    if len(result.keys) == 2:
        k0, k1 = result.keys
        mat = result.matrix("recall@5")
        lines += ["", f"{s} recall@5: rows {k0}, columns {k1}"]
        colw = max(8, *(len(str(v)) for v in result.grid[k1]))
        roww = max(len(k0), *(len(str(v)) for v in result.grid[k0]))
        lines.append(" " * roww + "".join(str(v).rjust(colw) for v in result.grid[k1]))
        for a, row in zip(result.grid[k0], mat, strict=True):
            lines.append(str(a).rjust(roww) + "".join(f"{x:.3f}".rjust(colw) for x in row))
    b = result.best
    lines += [
        "",
        "best on "
        + s
        + ": "
        + ", ".join(f"{k}={v}" for k, v in b.values.items())
        + f" (config {b.config_hash}): recall@5 {b.tune['recall@5']:.3f}, mrr {b.tune['mrr']:.3f};"
        + f" holdout recall@5 {b.holdout['recall@5']:.3f}, mrr {b.holdout['mrr']:.3f};"
        + f" p95 {b.latency_p95:.1f} ms",
        "try it: wikirag experiment try "
        + " ".join(f"--set {k}={_yaml_text(v)}" for k, v in b.values.items()),
        "(* best, = the current value)",
    ]
    if result.latency_within_noise():
        lines.append(
            f"latency: every point within the noise floor ({result.latency_noise_ms():.1f} ms);"
            " read no latency difference into this sweep"
        )
    if warning := result.holdout_warning():
        lines.append("warning: " + warning)
    return "\n".join(lines) + "\n"


def _yaml_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def sweep_figures(result: SweepResult, measure: str = "recall@5") -> list[Any]:
    """Plotly figures: the metric over the grid (line or heatmap) and quality vs p95 latency."""
    import plotly.graph_objects as go

    figs = []
    s = result.split
    if len(result.keys) == 1:
        from plotly.subplots import make_subplots

        (k,) = result.keys
        xs = [str(p.values[k]) for p in result.points]
        # One axis per measure: on a shared axis a flat 0.55 recall line hid a 0.03 MRR
        # change. The config the sweep started from is always a grid point (sweep()).
        panels = [(f"{s} {measure}", "tune", measure), (f"{s} mrr", "tune", "mrr")]
        panels.append(("holdout recall@5", "holdout", "recall@5"))
        fig = make_subplots(
            rows=len(panels), cols=1, shared_xaxes=True, subplot_titles=[p[0] for p in panels]
        )
        for row, (name, split, m) in enumerate(panels, 1):
            ys = [(p.tune if split == "tune" else p.holdout)[m] for p in result.points]
            fig.add_scatter(x=xs, y=ys, name=name, mode="lines+markers", row=row, col=1)
            fig.update_yaxes(tickformat=".3f", title_text=m, row=row, col=1)
        cur = result.current_index
        if cur is not None:
            for row in range(1, len(panels) + 1):
                fig.add_vline(x=cur, line_dash="dash", line_color="#6e7781", row=row, col=1)
            fig.add_annotation(x=xs[cur], y=1.04, yref="paper", text="current", showarrow=False)
        fig.update_layout(
            title=f"{measure} over {k}", height=180 * len(panels) + 80, showlegend=False
        )
        fig.update_xaxes(type="category")
        fig.update_xaxes(title_text=k, row=len(panels), col=1)
        figs.append(fig)
    else:
        k0, k1 = result.keys
        fig = go.Figure(
            go.Heatmap(
                z=result.matrix(measure),
                x=[str(v) for v in result.grid[k1]],
                y=[str(v) for v in result.grid[k0]],
                colorscale="Viridis",
                texttemplate="%{z:.3f}",
            )
        )
        fig.update_layout(
            title=f"{s} {measure}",
            xaxis_title=k1,
            yaxis_title=k0,
            xaxis_type="category",
            yaxis_type="category",
        )
        figs.append(fig)
    front = set(result.pareto(measure))
    labels = [", ".join(f"{k}={v}" for k, v in p.values.items()) for p in result.points]
    scatter = go.Figure(
        go.Scatter(
            x=[p.latency_p95 for p in result.points],
            y=[p.tune[measure] for p in result.points],
            mode="markers",
            text=labels,
            marker={
                "size": [14 if i == result.best_index else 9 for i in range(len(result.points))],
                "symbol": ["star" if i in front else "circle" for i in range(len(result.points))],
            },
            hovertemplate="%{text}<br>p95 %{x:.1f} ms<br>" + measure + " %{y:.3f}<extra></extra>",
        )
    )
    scatter.update_layout(
        title=f"{s} {measure} vs p95 latency (stars: Pareto front)",
        xaxis_title="p95 latency (ms)",
        yaxis_title=measure,
        yaxis_tickformat=".3f",
    )
    lat = [p.latency_p95 for p in result.points]
    if lat and result.latency_within_noise():
        # Never magnify noise: span at least the noise floor around the points.
        mid, half = (max(lat) + min(lat)) / 2, result.latency_noise_ms()
        scatter.update_xaxes(range=[max(0.0, mid - half), mid + half])
        scatter.update_layout(
            title=f"{s} {measure} vs p95 latency — latency differences are within noise"
        )
    figs.append(scatter)
    return figs
