"""What a run is called: its config label (``baseline``, ``baseline+fusion.bm25_weight=0.5``,
``v7``, ``defaults``, a YAML file's stem) plus when it ran.

A label is how a person names a config; the config hash stays the identity (two labels
of one config are one config). Records saved before labels existed get one derived from
their config (:func:`derived_label`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.config import EngineConfig

# An old record whose config differs from the defaults in more keys than this is named by
# its hash: a label listing ten changes is no easier to read than one.
MAX_DERIVED_CHANGES = 3


def with_overrides_label(base: str, overrides: Mapping[str, Any] | None) -> str:
    """``base`` plus ``+key=value,key2=value`` for ``overrides`` (the compare CLI's syntax)."""
    if not overrides:
        return base
    return base + "+" + ",".join(f"{k}={_value(v)}" for k, v in overrides.items())


def _value(v: Any) -> str:
    # 30.0 reads as the 30 a person typed; other floats keep every digit
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def workspace_label(config_path: Path | None, overrides: Mapping[str, Any] | None = None) -> str:
    """The label of a workspace's effective config: ``baseline`` for the accepted baseline
    file, ``defaults`` when there is no config, else the YAML file's stem; ``--set`` pairs
    appended."""
    if config_path is None:
        base = "defaults"
    elif config_path.name == "baseline.yaml":
        base = "baseline"
    else:
        base = config_path.stem
    return with_overrides_label(base, overrides)


def derived_label(config_yaml: str, config_hash: str = "") -> str:
    """A label for a record saved without one: ``defaults``, ``defaults+key=value`` (up to
    :data:`MAX_DERIVED_CHANGES` changes) or ``config <hash6>``."""
    try:
        cfg = EngineConfig.from_yaml(config_yaml or "{}")
    except Exception:  # an unreadable config still gets a name; reading it fails elsewhere
        return f"config {config_hash[:6]}" if config_hash else "config"
    changes = EngineConfig().diff(cfg)
    if len(changes) > MAX_DERIVED_CHANGES:
        return f"config {(config_hash or cfg.hash)[:6]}"
    return with_overrides_label("defaults", {k: b for k, (_, b) in changes.items()})


def run_name(label: str, created: str) -> str:
    """``label · 2026-12-02 02:53`` (UTC, to the minute): how runs are listed."""
    when = created.replace("T", " ").rstrip("Z")[:16]
    return f"{label} · {when}" if when else label
