"""Resolve the CLI/UI conventions (README "Command line"): --kb, --index, --config, --dataset defaults."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.config import EngineConfig
from engine.errors import EngineError


@dataclass(frozen=True)
class Workspace:
    """Where one KB's files live. Paths are relative to the current directory unless absolute."""

    kb: Path
    index: Path
    dataset: Path
    experiments: Path
    config_path: Path | None  # None = built-in defaults

    @property
    def name(self) -> str:
        return self.kb.resolve().name

    @property
    def baseline_path(self) -> Path:
        return self.experiments / "baseline.yaml"

    @property
    def runs_dir(self) -> Path:
        return self.experiments / "runs"

    def load_config(self) -> EngineConfig:
        if self.config_path is None:
            return EngineConfig()
        return EngineConfig.load(self.config_path)


def resolve(
    kb: str | Path = "wiki",
    index: str | Path | None = None,
    config: str | Path | None = None,
    dataset: str | Path | None = None,
    experiments_root: str | Path = "experiments",
    state_root: str | Path = ".wikirag",
) -> Workspace:
    """Apply the defaults: index under .wikirag/<kb>, config = accepted baseline if any."""
    kb_path = Path(kb)
    if not kb_path.is_dir():
        raise EngineError(f"knowledge base folder {kb_path} not found; pass --kb DIR")
    name = kb_path.resolve().name
    exp = Path(experiments_root) / name
    if config is not None:
        cfg: Path | None = Path(config)
    elif (exp / "baseline.yaml").is_file():
        cfg = exp / "baseline.yaml"
    else:
        cfg = None
    return Workspace(
        kb=kb_path,
        index=Path(index) if index else Path(state_root) / name,
        dataset=_dataset_path(dataset, name),
        experiments=exp,
        config_path=cfg,
    )


def _dataset_path(dataset: str | Path | None, kb_name: str) -> Path:
    """A path as given, or a bare name like ``wiki`` meaning ``datasets/wiki.yaml``."""
    if not dataset:
        return Path("datasets") / f"{kb_name}.yaml"
    p = Path(dataset)
    if not p.exists() and p.suffix == "" and len(p.parts) == 1:
        return Path("datasets") / f"{p.name}.yaml"
    return p
