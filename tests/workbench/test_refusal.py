"""The calibrated evidence judge: features, fit, cross-validation, storage, and the chat using
it (extractive and with the LLM judge on a real local OpenAI-compatible server)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

from engine.errors import ConfigError
from engine.indexer import build_index
from engine.tree import parse_kb
from tests.engine.engine_kit import HASH_CFG, write_kb
from tests.workbench.openai_server import ChatServer, Say, task_of
from tests.workbench.test_chat import CFG, CHAPTERS, OverlapRetriever, llm_for, steps
from workbench.answer.chat import answer
from workbench.answer.loop import retrieve_sources
from workbench.answer.refusal import (
    CALIBRATION_FILE,
    FEATURES,
    EvidenceFeatures,
    RefusalModel,
    choose_thresholds,
    cross_validate,
    embedder_of,
    evidence_features,
    fit,
    folds,
    load_model,
    model_for,
)
from workbench.answer.terms import key_terms
from workbench.cli import main

ANSWERABLE = [
    "BM25 k1 term saturation parameter",
    "reciprocal rank fusion weight divided by k plus rank",
    "按标题切分 切块策略 章节 检索单元",
    "固定长度切分 512 token 重叠窗口",
    "tool allowlist unknown tools rejected error message",
    "BM25 length normalisation b parameter",
]
UNANSWERABLE = [
    "公司年会在哪里举办？",
    "Slack bot channel invite?",
    "Kubernetes namespace embed-svc?",
    "报销流程审批人员？",
]


@dataclass
class _Node:
    breadcrumb: tuple[str, ...]
    title: str
    content: str


@dataclass
class _KB:
    root: str
    nodes: dict[str, _Node]


@dataclass
class _Candidates:
    vector: tuple[tuple[str, float], ...]


class ProbedRetriever(OverlapRetriever):
    """The chat test's retriever plus what the judge probes: ``kb`` and ``candidates``.
    Its "cosine" grows with the key terms the best chapter shares with the query."""

    def __init__(self, root: str = "/somewhere/kb") -> None:
        super().__init__()
        self.kb = _KB(
            root,
            {
                nid: _Node(tuple(crumb), title, content)
                for nid, title, crumb, content, *_ in CHAPTERS
            },
        )

    def candidates(self, query: str, *, pool: int, mode: str = "hybrid") -> _Candidates:
        terms = key_terms(query)
        best = max(
            sum(t in f"{' '.join(n.breadcrumb)} {n.title} {n.content}".lower() for t in terms)
            for n in self.kb.nodes.values()
        )
        return _Candidates((("x", 0.2 + 0.1 * best),))


def _features(retr: ProbedRetriever, questions: list[str]) -> list[EvidenceFeatures]:
    return [evidence_features(q, retrieve_sources(retr, q, 3), retr) for q in questions]


@pytest.fixture(scope="module")
def model() -> RefusalModel:
    retr = ProbedRetriever()
    feats = _features(retr, ANSWERABLE + UNANSWERABLE)
    labels = [True] * len(ANSWERABLE) + [False] * len(UNANSWERABLE)
    return fit(feats, labels, provenance={"dataset": "test"})


def test_features_count_matched_missing_and_absent_terms():
    retr = ProbedRetriever()
    f = _features(retr, ["BM25 k1 saturation 年会"])[0]
    assert (f.matched_terms, f.missing_terms, f.absent_terms) == (3, 1, 1)
    assert f.top_cosine == pytest.approx(0.5)


def test_clearly_unanswerable_question_is_refused_by_the_model(model):
    ans = answer("公司年会在哪里举办？", ProbedRetriever(), llm=None, refusal_model=model)
    assert ans.refusal and ans.citations == []
    judged = steps(ans, "judge")[0]
    assert judged.startswith("model: p(answerable)") and judged.endswith("-> insufficient")


def test_clearly_answerable_question_is_answered(model):
    q = "BM25 k1 saturation parameter"
    ans = answer(q, ProbedRetriever(), llm=None, refusal_model=model)
    assert not ans.refusal and ans.citations
    assert steps(ans, "judge")[0].endswith("-> enough")


def test_without_a_calibration_the_coverage_rule_judges(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no experiments/<kb>/refusal.yaml here
    ans = answer("BM25 k1 saturation parameter", ProbedRetriever(), llm=None)
    assert steps(ans, "judge")[0].startswith("rule: coverage")


def test_calibration_round_trips_and_is_found_for_the_kb(model, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "experiments" / "kb" / CALIBRATION_FILE
    model.save(path)
    assert load_model(path) == model
    assert "calibrate-refusal" in path.read_text(encoding="utf-8").splitlines()[0]
    assert model_for(ProbedRetriever(root=str(tmp_path / "kb"))) == model
    assert model_for(ProbedRetriever(root=str(tmp_path / "other"))) is None
    ans = answer("公司年会在哪里举办？", ProbedRetriever(str(tmp_path / "kb")), llm=None)
    assert steps(ans, "judge")[0].startswith("model: ")
    # Fitted with another embedder: its cosines mean nothing here, the rule judges instead.
    replace(model, provenance={"embedder": "openai/text-embedding-3-small/0"}).save(path)
    retr = ProbedRetriever(str(tmp_path / "kb"))
    retr.config = CFG
    assert model_for(retr) is None
    replace(model, provenance={"embedder": embedder_of(CFG)}).save(path)
    assert model_for(retr) is not None


def test_a_broken_calibration_is_a_one_line_error(tmp_path, model):
    path = tmp_path / CALIBRATION_FILE
    model.save(path)
    path.write_text(path.read_text().replace("grey_low:", "grey_lo:"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"refusal\.yaml: refusal calibration is missing"):
        load_model(path)
    bad = replace(model, grey_low=0.9, refuse_below=0.1)
    bad.save(path)
    with pytest.raises(ConfigError, match="grey_low <= refuse_below"):
        load_model(path)


def test_thresholds_respect_the_false_refusal_cap():
    rng = np.random.default_rng(0)
    p = np.r_[rng.uniform(0.3, 1.0, 40), rng.uniform(0.0, 0.5, 10)]
    answerable = np.r_[np.ones(40, bool), np.zeros(10, bool)]
    lo, hi = choose_thresholds(p, answerable, max_false_refusal=0.05)
    assert (p[answerable] < lo).sum() <= 2 and (p[answerable] < lo).sum() >= 1
    assert (p[~answerable] < hi).mean() >= 0.95


def test_cross_validation_is_deterministic_and_stratified():
    rng = np.random.default_rng(1)
    feats = [
        EvidenceFeatures(
            float(rng.normal(0.45 if a else 0.3, 0.08)), int(rng.integers(1, 6)), 2, 0 if a else 1
        )
        for a in [True] * 40 + [False] * 10
    ]
    labels = [True] * 40 + [False] * 10
    assert folds(labels, 5).count(0) == 10
    assert [f for f, a in zip(folds(labels, 5), labels, strict=True) if not a] == [
        0,
        1,
        2,
        3,
        4,
    ] * 2
    first = cross_validate(feats, labels, k=5)
    assert first == cross_validate(feats, labels, k=5)
    assert first.n_unanswerable == 10 and first.n_answerable == 40
    assert first.unanswerable_refused == sum(
        r for r, a in zip(first.refused, labels, strict=True) if not a
    )


def test_too_few_unanswerable_items_for_the_folds_is_a_clear_error():
    feats = [EvidenceFeatures(0.1 * i, i, 1, 0) for i in range(6)]
    with pytest.raises(ValueError, match="fewer than 2 unanswerable items"):
        cross_validate(feats, [True, True, True, True, False, False], k=2)


def test_cross_validated_rates_are_not_the_training_fit():
    # Labels unrelated to the features: a fit on everything scores itself well, a model
    # that never saw the item cannot (the rates calibrate-refusal reports are of this kind).
    rng = np.random.default_rng(2)
    feats = [EvidenceFeatures(float(x), int(m), int(s), int(a)) for x, m, s, a in zip(
        rng.uniform(0.2, 0.6, 60), rng.integers(0, 5, 60), rng.integers(0, 5, 60),
        rng.integers(0, 3, 60), strict=True)]  # fmt: skip
    labels = [bool(b) for b in rng.random(60) > 0.2]
    cv = cross_validate(feats, labels, k=5, max_false_refusal=0.10)
    whole = fit(feats, labels, max_false_refusal=0.10)
    train_refused = [whole.verdict(whole.probability(f)) == "insufficient" for f in feats]
    assert list(cv.refused) != train_refused


def test_grey_band_goes_to_the_llm_judge(model):
    q = "公司年会在哪里举办？"
    p = model.probability(_features(ProbedRetriever(), [q])[0])
    grey = replace(model, grey_low=p - 0.01, refuse_below=p + 0.01, grey_high=p + 0.02)
    with ChatServer(
        lambda req: Say("YES") if task_of(req) == "judge" else Say("在公司总部 [1]。")
    ) as srv:
        ans = answer(q, ProbedRetriever(), llm=llm_for(srv), refusal_model=grey)
        assert srv.tasks()[0] == "judge"
    judged = steps(ans, "judge")[0]
    assert "-> grey; LLM said 'YES' -> enough" in judged
    assert not ans.refusal and ans.mode == "llm"
    # Without an LLM the same band is refused: p is below refuse_below.
    ans = answer(q, ProbedRetriever(), llm=None, refusal_model=grey)
    assert ans.refusal


def test_calibrate_refusal_writes_the_kb_calibration_with_provenance(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    kb = write_kb(tmp_path / "kb")
    build_index(parse_kb(kb), HASH_CFG, str(tmp_path / ".wikirag" / "kb"))
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "kb.yaml").write_text(
        """name: tiny
queries:
  - {id: q1, query: 按标题切块, relevant: ["rag/chunking#切块策略/按标题切块"]}
  - {id: q2, query: 重排会增加多少延迟, relevant: ["retrieval/rerank#重排/延迟"]}
  - {id: q4, query: 交叉编码器读取什么, relevant: ["retrieval/rerank#重排/交叉编码器"]}
  - {id: q5, query: 块之间的 overlap, relevant: ["rag/chunking#切块策略/固定长度切块"]}
  - {id: q9, query: 年会在哪里, unanswerable: true}
  - {id: q10, query: Slack bot 怎么加, unanswerable: true}
  - {id: q11, query: 报销审批流程, unanswerable: true}
  - {id: q12, query: GPU 集群怎么预约, unanswerable: true}
""",
        encoding="utf-8",
    )
    exp = tmp_path / "experiments" / "kb"
    exp.mkdir(parents=True)
    HASH_CFG.save(exp / "baseline.yaml")
    assert main(["calibrate-refusal", "--kb", "kb", "--folds", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cross-validated (2-fold): unanswerable refused ")
    stored = load_model(exp / CALIBRATION_FILE)
    assert stored.provenance["dataset"] == str(Path("datasets") / "kb.yaml")
    assert stored.provenance["items"] == {"answerable": 4, "unanswerable": 4}
    assert stored.provenance["cross_validation"]["folds"] == 2
    # more unanswerable items calibrated on, and a set reported on but never fitted on
    (tmp_path / "more.yaml").write_text(
        "name: more\nqueries:\n"
        "  - {id: u1, query: 食堂几点关门, unanswerable: true}\n"
        "  - {id: u2, query: 停车位怎么申请, unanswerable: true}\n",
        encoding="utf-8",
    )
    (tmp_path / "held.yaml").write_text(
        "name: held\nqueries:\n"
        "  - {id: h1, query: 重排的延迟, relevant: ['retrieval/rerank#重排/延迟']}\n"
        "  - {id: h2, query: 体检在哪家医院, unanswerable: true}\n",
        encoding="utf-8",
    )
    args = ["calibrate-refusal", "--kb", "kb", "--folds", "2", "--add-dataset", "more.yaml"]
    assert main([*args, "--heldout", "held.yaml"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(
        r"  tiny: unanswerable refused \d/4 .*answerable wrongly refused \d/4.*", lines[1]
    )
    assert re.fullmatch(
        r"  more: unanswerable refused \d/2 .*wrongly refused 0/0 \(n/a\)", lines[2]
    )
    assert re.fullmatch(
        r"held out held \(never fitted on\): unanswerable refused \d/1 .*refused \d/1 .*", lines[3]
    )
    stored = load_model(exp / CALIBRATION_FILE)
    assert stored.provenance["items"] == {"answerable": 4, "unanswerable": 6}
    assert stored.provenance["added_datasets"] == ["more.yaml"]
    assert set(stored.provenance["cross_validation"]["per_set"]) == {"tiny", "more"}
    assert stored.provenance["heldout"]["held"]["unanswerable_refused"] in ("0/1", "1/1")
    assert main(["calibrate-refusal", "--kb", "kb", "--max-false-refusal", "1.5"]) == 2
    assert "--max-false-refusal must be in [0, 1)" in capsys.readouterr().err


class VocabRetriever(ProbedRetriever):
    """Says how close each term is to the KB's vocabulary, as ``Engine`` does."""

    def vocabulary_similarity(self, terms: list[str]) -> list[float]:
        sims = {"bm25": 1.0, "k1": 1.0, "saturation": 0.72, "年会": 0.3, "食堂": 0.69}
        return [sims.get(t, 0.0) for t in terms]


def test_unfamiliar_terms_are_those_no_kb_term_resembles():
    f = _features(VocabRetriever(), ["BM25 k1 saturation 年会 食堂"])[0]
    assert (f.absent_terms, f.unfamiliar_terms) == (2, 2)  # 年会 0.3, 食堂 0.69 < 0.7
    f = _features(VocabRetriever(), ["BM25 k1 saturation"])[0]
    assert f.unfamiliar_terms == 0  # saturation 0.72 resembles a KB term


def test_without_a_vocabulary_unfamiliar_falls_back_to_absent():
    f = _features(ProbedRetriever(), ["BM25 k1 saturation 年会"])[0]
    assert f.unfamiliar_terms == f.absent_terms == 1


def test_a_calibration_from_before_unfamiliar_terms_still_loads_and_judges(model):
    old = {**model.to_dict()}
    keep = [i for i, n in enumerate(old["features"]) if n != "unfamiliar_terms"]
    for k in ("features", "mean", "scale", "weights"):
        old[k] = [old[k][i] for i in keep]
    four = RefusalModel.from_dict(old)
    assert four.features == ("top_cosine", "matched_terms", "missing_terms", "absent_terms")
    f = EvidenceFeatures(0.5, 3, 0, 0, unfamiliar_terms=9)  # ignored by the 4-signal model
    assert four.probability(f) == four.probability(replace(f, unfamiliar_terms=0))


def _constant_model(p_logit: float) -> RefusalModel:
    n = len(FEATURES)
    return RefusalModel(FEATURES, (0.0,) * n, (1.0,) * n, (0.0,) * n, p_logit, 0.3, 0.3, 0.8)


def test_a_confident_judge_quotes_the_top_chapter_when_no_sentence_shares_a_term():
    # e.g. an English question over Chinese chapters: no sentence shares a term with it
    q = "zebra giraffe"
    sure = answer(q, ProbedRetriever(), llm=None, refusal_model=_constant_model(10.0))
    assert not sure.refusal and [c["n"] for c in sure.citations] == [1]
    assert sure.answer.endswith("[1]")
    # judged grey, or without a calibrated judge, the same question is refused as before
    grey = answer(q, ProbedRetriever(), llm=None, refusal_model=_constant_model(0.0))
    assert grey.refusal and grey.citations == []
    assert answer(q, ProbedRetriever(), llm=None, refusal_model=None).refusal
