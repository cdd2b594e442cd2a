"""BEIR import: Markdown passages whose H1 ids match the chapter tree, and a golden set."""

from __future__ import annotations

import json

import pytest
import yaml

from engine.errors import EngineError
from workbench.eval.beir import heading_node_id, import_beir, passage_markdown, safe_name

CORPUS = [
    {"_id": "d1", "title": "Alpha Beta", "text": "First passage."},
    {"_id": "d/2", "title": "", "text": "No title here.\n# not a heading\n---"},
    {"_id": "D3", "title": "泡泡战士 *(游戏)* & <b>x</b> {#id} ##", "text": "中文段落。",
     "metadata": {"category": "games"}},
    {"_id": "index", "title": "???", "text": "Only punctuation in the title."},
    {"_id": "d5", "title": "Extra", "text": "more", "category": "misc"},
]  # fmt: skip
QUERIES = [
    {"_id": "q1", "text": "what is alpha?", "answers": ["First"]},
    {"_id": "q2", "text": "no judgments"},
    {"_id": "q3", "text": "graded and many", "answers": []},
    {"_id": "q4", "text": "only unknown docs"},
    {"_id": "q5", "text": "game?"},
    {"_id": "q6", "text": "  "},
]
QRELS = [
    ("q1", "d1", 1),
    ("q3", "d1", 1),
    ("q3", "d/2", 2),
    ("q3", "D3", 1),
    ("q3", "index", 1),
    ("q3", "d5", 3),
    ("q4", "zz", 1),
    ("q4", "d1", 0),
    ("q5", "D3", 1),
    ("q6", "d1", 1),
]


def _write_beir(folder, corpus=CORPUS, queries=QUERIES, qrels=QRELS):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in corpus)
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries)
    )
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in qrels]
    (folder / "qrels.tsv").write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture
def imported(tmp_path):
    src = _write_beir(tmp_path / "tiny")
    result = import_beir(src, tmp_path / "kb", tmp_path / "ds.yaml")
    return tmp_path, result


def test_files_and_golden_set(imported):
    tmp_path, result = imported
    assert sorted(p.name for p in (tmp_path / "kb").glob("*.md")) == [
        "D3.md", "d1.md", "d5.md", "d_2.md", "index_.md",
    ]  # fmt: skip
    assert result.passages == 5
    assert (tmp_path / "kb" / "d1.md").read_text() == (
        "---\ntitle: Alpha Beta\ntype: concept\ncategory: beir\nkeywords: []\n---\n\n"
        "# Alpha Beta\n\nFirst passage.\n"
    )
    ds = yaml.safe_load((tmp_path / "ds.yaml").read_text())
    assert ds["name"] == "tiny"
    by_id = {q["id"]: q for q in ds["queries"]}
    assert list(by_id) == ["q1", "q3", "q5"]
    assert by_id["q1"] == {
        "id": "q1",
        "query": "what is alpha?",
        "relevant": ["d1#alpha-beta"],
        "difficulty": "medium",
        "category": "beir",
        "answer_contains": ["First"],
    }
    q3 = by_id["q3"]
    assert q3["relevant"] == ["d5#extra", "d_2#d2", result.node_ids["d1"], result.node_ids["D3"]]
    assert q3["grades"] == {
        "d5#extra": 3,
        "d_2#d2": 2,
        "d1#alpha-beta": 1,
        result.node_ids["D3"]: 1,
    }
    assert "5 relevant" in q3["notes"]
    assert result.truncated_queries == ("q3",)
    assert result.skipped_queries == ("q4", "q6")


def test_front_matter_category_and_escaped_title(imported):
    tmp_path, result = imported
    text = (tmp_path / "kb" / "D3.md").read_text()
    assert "category: games" in text
    assert "# 泡泡战士 \\*\\(游戏\\)\\* \\& \\<b\\>x\\<\\/b\\> \\{\\#id\\} \\#\\#\n" in text
    assert "category: misc" in (tmp_path / "kb" / "d5.md").read_text()
    body = (tmp_path / "kb" / "d_2.md").read_text()
    assert "\n\\# not a heading\n\\---\n" in body
    assert result.node_ids["index"] == "index_#section"


def test_ids_exist_in_the_parsed_tree(imported):
    tree = pytest.importorskip("engine.tree")
    if not hasattr(tree, "parse_kb"):
        pytest.skip("engine.tree.parse_kb is not written yet")
    tmp_path, result = imported
    kb = tree.parse_kb(tmp_path / "kb")
    ds = yaml.safe_load((tmp_path / "ds.yaml").read_text())
    for q in ds["queries"]:
        for nid in q["relevant"]:
            assert nid in kb.nodes, nid
            assert kb.nodes[nid].level == 1
    for did, nid in result.node_ids.items():
        assert nid in kb.nodes, did
        # one passage = one chapter: the H1 has no child headings
        assert kb.nodes[nid].children_ids == ()


def test_golden_set_validates(imported):
    golden = pytest.importorskip("workbench.eval.golden")
    tree = pytest.importorskip("engine.tree")
    tmp_path, _ = imported
    gs = golden.load(tmp_path / "ds.yaml")
    errors = [i for i in golden.validate(gs, tree.parse_kb(tmp_path / "kb")) if i.level == "error"]
    assert [str(i) for i in errors] == []


def test_limit_queries_and_safe_names(tmp_path):
    src = _write_beir(tmp_path / "tiny")
    result = import_beir(src, tmp_path / "kb", tmp_path / "ds.yaml", limit_queries=2, name="mini")
    ds = yaml.safe_load((tmp_path / "ds.yaml").read_text())
    assert ds["name"] == "mini"
    assert [q["id"] for q in ds["queries"]] == ["q1", "q3"]
    assert result.queries == 2
    assert safe_name("a/b c:d") == "a_b_c_d"
    assert safe_name("..hidden") == "hidden"
    assert safe_name("x" * 300).startswith("x" * 100 + "-")
    assert heading_node_id("doc", "Hello, World!") == "doc#hello-world"
    assert passage_markdown({"_id": "x", "text": "t"}).count("# x\n") == 1


def test_case_collisions_get_distinct_files(tmp_path):
    corpus = [
        {"_id": "Ab", "title": "one", "text": "1"},
        {"_id": "ab", "title": "two", "text": "2"},
    ]
    src = _write_beir(tmp_path / "c", corpus=corpus, queries=[], qrels=[])
    result = import_beir(src, tmp_path / "kb", tmp_path / "ds.yaml")
    assert len({nid.split("#")[0].lower() for nid in result.node_ids.values()}) == 2
    assert len(list((tmp_path / "kb").glob("*.md"))) == 2


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (lambda f: (f / "corpus.jsonl").unlink(), "no such file"),
        (lambda f: (f / "qrels.tsv").unlink(), "no qrels.tsv"),
        (
            lambda f: (f / "corpus.jsonl").write_text('{"_id": "a"}\n{oops\n'),
            "corpus.jsonl:2: not valid JSON",
        ),
        (lambda f: (f / "queries.jsonl").write_text('{"text": "no id"}\n'), "queries.jsonl:1: "),
        (
            lambda f: (f / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\n"),
            "qrels.tsv:2: expected 3",
        ),
        (lambda f: (f / "qrels.tsv").write_text("q1\td1\thigh\n"), "qrels.tsv:1: score"),
    ],
)
def test_malformed_input_is_an_engine_error(tmp_path, corrupt, message):
    src = _write_beir(tmp_path / "bad")
    corrupt(src)
    with pytest.raises(EngineError, match=message):
        import_beir(src, tmp_path / "kb", tmp_path / "ds.yaml")


def test_cli(tmp_path, capsys):
    from workbench.cli import main

    src = _write_beir(tmp_path / "tiny")
    argv = [
        "import-beir",
        str(src),
        "--kb-out",
        str(tmp_path / "kb"),
        "--dataset-out",
        str(tmp_path / "d.yaml"),
    ]
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["queries"] == 3
    assert main(argv) == 2  # the same targets again: refused, nothing touched
    assert "pass --force to replace it" in capsys.readouterr().err
    assert main([*argv, "--force"]) == 0
    assert "wrote 5 passages" in capsys.readouterr().out
    assert (
        main(["import-beir", str(tmp_path / "absent"), "--kb-out", "k", "--dataset-out", "d"]) == 2
    )
    assert "not a folder" in capsys.readouterr().err


def test_cmrc2018_trial(shared_data, tmp_path):
    src = shared_data / "benchmarks" / "cmrc2018-trial"
    result = import_beir(src, tmp_path / "kb", tmp_path / "cmrc.yaml")
    assert result.passages == 256
    assert result.queries == 1000  # of 1,002: two have an empty text in the source
    assert result.skipped_queries == ("TRIAL_776_QUERY_4", "TRIAL_20_QUERY_0")
    assert len(list((tmp_path / "kb").glob("*.md"))) == 256
    ds = yaml.safe_load((tmp_path / "cmrc.yaml").read_text())
    first = ds["queries"][0]
    assert first["id"] == "TRIAL_800_QUERY_0"
    assert first["query"] == "生命数耗完即算为什么？"
    assert first["relevant"] == ["TRIAL_800#泡泡战士"]
    assert first["answer_contains"] == ["踢爆"]
    tree = pytest.importorskip("engine.tree")
    if hasattr(tree, "parse_kb"):
        kb = tree.parse_kb(tmp_path / "kb")
        missing = [nid for q in ds["queries"] for nid in q["relevant"] if nid not in kb.nodes]
        assert missing == []
        golden = pytest.importorskip("workbench.eval.golden")
        issues = golden.validate(golden.load(tmp_path / "cmrc.yaml"), kb)
        assert [str(i) for i in issues if i.level == "error"] == []


def test_an_existing_kb_or_dataset_is_not_overwritten_without_force(tmp_path):
    src = _write_beir(tmp_path / "tiny")
    kb, ds = tmp_path / "kb", tmp_path / "ds.yaml"
    kb.mkdir()
    (kb / "mine.md").write_text("# Mine\n", encoding="utf-8")
    with pytest.raises(EngineError, match=r"kb exists and is not empty; pass --force"):
        import_beir(src, kb, ds)
    assert [p.name for p in kb.iterdir()] == ["mine.md"] and not ds.exists()
    ds.write_text("name: mine\n", encoding="utf-8")
    with pytest.raises(EngineError, match=r"ds\.yaml exists; pass --force"):
        import_beir(src, tmp_path / "empty-kb", ds)
    assert ds.read_text(encoding="utf-8") == "name: mine\n"
    result = import_beir(src, kb, ds, force=True)
    assert not (kb / "mine.md").exists() and result.passages == len(list(kb.glob("*.md")))
    assert "name: mine" not in ds.read_text(encoding="utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds.yaml", "kb", "tiny"]  # no leftovers


def test_an_error_part_way_leaves_no_half_written_kb(tmp_path):
    src = _write_beir(tmp_path / "tiny")
    (src / "queries.jsonl").write_text('{"_id": "q1", "text": "x"}\n{oops\n', encoding="utf-8")
    kb, ds = tmp_path / "kb", tmp_path / "ds.yaml"
    with pytest.raises(EngineError, match=r"queries\.jsonl:2: not valid JSON"):
        import_beir(src, kb, ds)  # the corpus was read and written before the queries failed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny"]
    kb.mkdir()
    (kb / "old.md").write_text("# Old\n", encoding="utf-8")
    with pytest.raises(EngineError):
        import_beir(src, kb, ds, force=True)
    assert [p.name for p in kb.iterdir()] == ["old.md"]  # the old KB is untouched


def test_help_lists_the_overwrite_flag(capsys):
    from workbench.cli import main

    with pytest.raises(SystemExit):
        main(["import-beir", "--help"])
    assert "--force" in capsys.readouterr().out
