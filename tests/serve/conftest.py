"""Fixtures for the server tests: a small KB copied from wiki/, indexed with the hash embedder,
and a real uvicorn server on 127.0.0.1 in a thread."""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters

from engine.config import EngineConfig
from engine.indexer import build_index
from engine.tree import parse_kb
from workbench.workspace import Workspace, resolve

REPO = Path(__file__).resolve().parents[2]
KB_FILES = (
    "rag/chunking-strategies.md",
    "rag/parent-child-chunks.md",
    "rag/rag-faq.md",
    "retrieval/hybrid-search.md",
    "retrieval/bm25-chinese-tokenization.md",
)


def hash_config() -> EngineConfig:
    return EngineConfig().with_overrides({"embedding.provider": "hash"})


@dataclass(frozen=True)
class TestKB:
    root: Path  # folder holding wiki/, index/, experiments/
    ws: Workspace
    cfg: EngineConfig
    config_file: Path

    __test__ = False  # not a test class, whatever its name


def make_kb(root: Path, *, index: bool = True) -> TestKB:
    """Copy KB_FILES of the bundled wiki under root/wiki; index them unless told not to."""
    kb = root / "wiki"
    for rel in KB_FILES:
        (kb / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "wiki" / rel, kb / rel)
    cfg = hash_config()
    config_file = root / "hash.yaml"
    cfg.save(config_file)
    ws = resolve(kb, root / "index", config_file, experiments_root=root / "experiments")
    if index:
        build_index(parse_kb(kb), cfg, str(ws.index))
    return TestKB(root=root, ws=ws, cfg=cfg, config_file=config_file)


@pytest.fixture(scope="module")
def test_kb(tmp_path_factory: pytest.TempPathFactory) -> TestKB:
    return make_kb(tmp_path_factory.mktemp("kb"))


@contextmanager
def live_server(app: Any) -> Iterator[str]:
    """Run ``app`` under uvicorn on 127.0.0.1 (free port) in a thread; yield its base URL."""
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def mcp_stdio_params(kb: TestKB, *extra: str) -> StdioServerParameters:
    """`wikirag mcp --stdio` over ``kb`` (plus ``extra`` flags) as the MCP client starts it."""
    args = ["-m", "workbench.cli", "mcp", "--stdio", "--kb", str(kb.ws.kb)]
    args += ["--index", str(kb.ws.index), "--config", str(kb.config_file), *extra]
    return StdioServerParameters(
        command=sys.executable,
        args=args,
        env={
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "PYTHONPATH": str(REPO),
            # No LLM: `ask` answers extractively, deterministic and offline.
            "OPENAI_BASE_URL": "",
            "WIKIRAG_LLM_MODEL": "",
        },
        cwd=str(kb.root),  # no experiments/ baseline and no .env there
    )
