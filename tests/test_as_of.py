"""Answers as of a date (docs/as-of.md): only what was in force that day answers. A section before
and after its amendment's date, a superseded document on either side of its replacement's date,
an undated document (in force from the beginning, with a warning), a date before anything took
effect (no_results saying so); dates on every way in, refused when invalid or out of order; each
[SOURCE n] says when its document took effect; the keeper's history and timeline."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import date

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from tests.helpers import make_settings
from worker.cli import main
from worker.ingest.ingestor import Ingestor
from worker.ingest.readers import parse_markdown
from worker.models import Amendment, DocumentFields
from worker.runtime import Runtime
from worker.serve.app import create_app
from worker.serve.mcp_server import SEARCH_TOOL, McpFace, build_server
from worker.store.database import Database

DECLARATION = """# Declaration of Covenants

## ARTICLE VII Use Restrictions

### Section 4.

No animals, livestock or poultry of any kind shall be raised, bred or kept on any lot, except that
dogs, cats or other household pets may be kept provided they are not kept for commercial purposes.

### Section 5.

No trailer, boat or recreational vehicle shall be parked in front of the building line of any lot.
"""

AMENDMENT = """# Second Amendment to the Declaration

Article VII, Section 4 of the Declaration is hereby deleted in its entirety and replaced with the
following: Up to four hens, and no roosters, may be kept in a backyard coop on any lot; no other
livestock or poultry shall be raised, bred or kept, and household pets may not be kept for
commercial purposes.
"""

GUIDELINES_2010 = """# Design Guidelines 2010

## Fences

A backyard fence may be at most four feet tall and must be built of split rail or picket wood.
"""

GUIDELINES_2020 = """# Design Guidelines 2020

## Fences

A backyard fence may be at most six feet tall and may be built of wood, vinyl or wrought iron.
"""

POOL_RULES = """# Pool Rules

## Hours

The community pool is open from 9 am to 9 pm; children under twelve swim with an adult.
"""

PETS = "Can I keep chickens or poultry on my lot?"
FENCE = "How tall can a backyard fence be?"


def _doc(ingestor: Ingestor, text: str, **fields):
    return ingestor.prepare_text(parse_markdown(text), DocumentFields(**fields))


@pytest.fixture(scope="module")
def dated(make_database, embedder, tmp_path_factory) -> Iterator[tuple[Database, object, Runtime]]:
    """Community "oak": a declaration (1990), an amendment of its Section 4 (2005), guidelines of
    2010 superseded by those of 2020; every document dated."""
    url = make_database("asof")
    db = Database(url)
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    ingestor.write(
        [
            _doc(ingestor, DECLARATION, document_id="ccrs", document_type="ccr", effective_date=date(1990, 1, 1)),
            _doc(
                ingestor,
                AMENDMENT,
                document_id="second-amendment",
                document_type="ccr",
                effective_date=date(2005, 6, 1),
                amends=(Amendment("ccrs", ("Article VII Section 4",)),),
            ),
            _doc(
                ingestor,
                GUIDELINES_2010,
                document_id="guidelines-2010",
                document_type="design_guidelines",
                effective_date=date(2010, 3, 1),
            ),
        ],
        community="oak",
    )
    ingestor.write(
        [
            _doc(
                ingestor,
                GUIDELINES_2020,
                document_id="guidelines-2020",
                document_type="design_guidelines",
                effective_date=date(2020, 1, 1),
                supersedes="guidelines-2010",
            )
        ],
        community="oak",
    )
    runtime = Runtime(make_settings(tmp_path_factory.mktemp("asof"), url), db, embedder)
    yield db, create_app(runtime=runtime).test_client(), runtime
    db.close()


def ask(client, query: str, **more) -> dict:
    response = client.post("/webhook/arc-retrieval", json={"query": query, "community": "oak", **more})
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def documents_in_context(answer: dict) -> set[str]:
    return {c["document_id"] for c in answer["chunks"] if c["source"] is not None}


def test_before_an_amendments_date_the_original_section_answers(dated):
    _, client, _ = dated
    answer = ask(client, PETS, as_of="2000-01-01")
    assert "No animals, livestock or poultry" in answer["context"]
    assert "Up to four hens" not in answer["context"]
    assert "second-amendment" not in {c["document_id"] for c in answer["chunks"]}
    original = next(c for c in answer["chunks"] if "poultry of any kind" in c["content"])
    # that day it was the rule: not demoted as amended, but it names what replaced it and when
    assert original["amended_by"] is None
    assert original["replaced"] == {
        "how": "amended",
        "document_id": "second-amendment",
        "document_name": "Second Amendment to the Declaration",
        "effective_date": "2005-06-01",
    }
    assert (
        "effective 1990-01-01; amended by Second Amendment to the Declaration [second-amendment] on 2005-06-01"
        in answer["context"]
    )


def test_after_an_amendments_date_the_amendment_answers_and_the_original_section_is_out(dated):
    _, client, _ = dated
    for as_of in ("2005-06-01", "2012-01-01"):
        answer = ask(client, PETS, as_of=as_of)
        assert "Up to four hens" in answer["context"], as_of
        assert not any("poultry of any kind" in c["content"] for c in answer["chunks"]), as_of
        assert "effective 2005-06-01" in answer["context"]
    # the day before, the amendment was not yet in force
    assert "Up to four hens" not in ask(client, PETS, as_of="2005-05-31")["context"]


def test_a_superseded_document_answers_before_its_replacements_date_and_not_after(dated):
    _, client, _ = dated
    before = ask(client, FENCE, as_of="2015-06-30")
    assert "four feet" in before["context"] and "six feet" not in before["context"]
    old = next(c for c in before["chunks"] if c["document_id"] == "guidelines-2010")
    assert old["superseded_by"] is None  # not yet superseded that day
    assert old["replaced"]["how"] == "superseded" and old["replaced"]["effective_date"] == "2020-01-01"
    assert (
        "effective 2010-03-01; superseded by Design Guidelines 2020 [guidelines-2020] on 2020-01-01"
        in before["context"]
    )
    after = ask(client, FENCE, as_of="2020-01-01")
    assert "six feet" in after["context"] and "four feet" not in after["context"]
    assert "guidelines-2010" not in {c["document_id"] for c in after["chunks"]}
    # before the first guidelines took effect there were none
    assert not {"guidelines-2010", "guidelines-2020"} & documents_in_context(ask(client, FENCE, as_of="2009-12-31"))


def test_without_as_of_the_answer_is_todays(dated):
    _, client, _ = dated
    now = ask(client, FENCE)
    assert "six feet" in now["context"] and "four feet" not in now["context"]
    assert not any("as_of" in w for w in now["warnings"])
    assert "effective 2020-01-01" in now["context"]
    pets = ask(client, PETS)
    original = next(c for c in pets["chunks"] if "poultry of any kind" in c["content"])
    assert original["amended_by"] == "second-amendment"  # today it is amended, and demoted as such
    assert original["replaced"]["effective_date"] == "2005-06-01"
    assert "Up to four hens" in pets["context"]
    # and with include_superseded the superseded guidelines name their replacement and its date
    old = ask(client, FENCE, include_superseded=True)
    replaced = next(c for c in old["chunks"] if c["document_id"] == "guidelines-2010")["replaced"]
    assert replaced == {
        "how": "superseded",
        "document_id": "guidelines-2020",
        "document_name": "Design Guidelines 2020",
        "effective_date": "2020-01-01",
    }


def test_a_date_before_anything_took_effect_has_no_results_saying_so(dated):
    _, client, _ = dated
    answer = ask(client, FENCE, as_of="1989-12-31")
    assert answer["status"] == "no_results" and answer["chunks"] == [] and answer["context"] == ""
    assert answer["message"].startswith("No document of this community was in force yet on 1989-12-31")
    assert "1990-01-01" in answer["message"]


def test_an_undated_document_is_in_force_from_the_beginning_with_a_warning(make_database, embedder, tmp_path):
    url = make_database("asofundated")
    db = Database(url)
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    ingestor.write(
        [
            _doc(ingestor, POOL_RULES, document_id="pool-rules", document_type="other"),
            _doc(
                ingestor,
                GUIDELINES_2020,
                document_id="guidelines-2020",
                document_type="design_guidelines",
                effective_date=date(2020, 1, 1),
            ),
        ]
    )
    client = create_app(runtime=Runtime(make_settings(tmp_path, url), db, embedder)).test_client()
    post = lambda body: client.post("/webhook/arc-retrieval", json=body).get_json()  # noqa: E731
    early = post({"query": "When is the pool open?", "as_of": "1950-01-01"})
    assert early["status"] != "no_results" and "9 am to 9 pm" in early["context"]
    assert "guidelines-2020" not in {c["document_id"] for c in early["chunks"]}
    warning = next(w for w in early["warnings"] if w.startswith("as_of 1950-01-01"))
    assert "pool-rules" in warning and "in force from the beginning" in warning
    assert next(c for c in early["chunks"] if c["document_id"] == "pool-rules")["effective_date"] is None
    # no such warning without as_of, nor when only dated documents answered
    assert not any(w.startswith("as_of") for w in post({"query": "When is the pool open?"})["warnings"])
    fence = post({"query": FENCE, "as_of": "2021-01-01", "top_k": 1})
    assert [c["document_id"] for c in fence["chunks"] if c["source"]] == ["guidelines-2020"]
    assert not any(w.startswith("as_of") for w in fence["warnings"])
    db.close()


@pytest.mark.parametrize("bad", ["2015-02-30", "2015-2-3", "20150203", "yesterday", 1420070400, "2015-02-03T00:00"])
def test_an_invalid_as_of_is_a_4xx_naming_it(dated, bad):
    _, client, _ = dated
    response = client.post("/webhook/arc-retrieval", json={"query": FENCE, "community": "oak", "as_of": bad})
    assert 400 <= response.status_code < 500 and response.get_json()["field"] == "as_of", response.get_json()


def test_dates_on_the_ingest_webhook_json_and_upload_and_out_of_order_is_refused(dated):
    _db, client, _ = dated
    post = lambda body: client.post("/webhook/arc-ingest", json={"community": "oak", **body})  # noqa: E731
    bad = post({"text": POOL_RULES, "document_type": "other", "document_id": "pool", "effective_date": "2019-13-01"})
    assert bad.status_code == 422 and bad.get_json()["field"] == "effective_date", bad.get_json()
    early = post(
        {
            "text": AMENDMENT.replace("Second", "Third"),
            "document_type": "ccr",
            "document_id": "third",
            "effective_date": "1985-01-01",
            "amends": [{"document_id": "ccrs", "sections": ["Article VII Section 5"]}],
        }
    )
    body = early.get_json()
    assert early.status_code == 422 and body["field"] == "effective_date", body
    assert "'third' amends 'ccrs'" in body["message"] and "1990-01-01" in body["message"]
    # the other way round: the declaration sent again dated after its stored amendment
    again = post({"text": DECLARATION, "document_type": "ccr", "document_id": "ccrs", "effective_date": "2006-01-01"})
    assert again.status_code == 422 and again.get_json()["field"] == "effective_date", again.get_json()
    late = post(
        {
            "text": GUIDELINES_2010.replace("2010", "2003"),
            "document_type": "design_guidelines",
            "document_id": "guidelines-2003",
            "effective_date": "2025-01-01",
            "superseded_by": "guidelines-2010",
        }
    )
    assert late.status_code == 422 and late.get_json()["field"] == "effective_date", late.get_json()
    upload = lambda when: client.post(  # noqa: E731
        "/webhook/arc-ingest",
        content_type="multipart/form-data",
        data={
            "document_type": "other",
            "document_id": "pool-rules",
            "community": "oak",
            "effective_date": when,
            "file": (io.BytesIO(POOL_RULES.encode()), "pool.md"),
        },
    )
    refused = upload("03/01/2001")
    assert refused.status_code == 422 and refused.get_json()["field"] == "effective_date", refused.get_json()
    assert upload("2001-03-01").status_code == 200
    listed = client.get("/webhook/arc-documents?community=oak").get_json()["documents"]
    assert {d["document_id"]: d["effective_date"] for d in listed} == {
        "ccrs": "1990-01-01",
        "second-amendment": "2005-06-01",
        "guidelines-2010": "2010-03-01",
        "guidelines-2020": "2020-01-01",
        "pool-rules": "2001-03-01",
    }
    assert client.delete("/webhook/arc-documents/pool-rules?community=oak").status_code == 200


def test_the_keepers_pages_show_each_documents_history_and_a_timeline(dated):
    _, client, _ = dated
    page = client.get("/documents/guidelines-2010?community=oak").get_data(as_text=True)
    assert "In force from 2010-03-01" in page
    history = page[page.index('id="history"') :]
    assert "Superseded by" in history and "guidelines-2020" in history and "on 2020-01-01" in history
    amended = client.get("/documents/ccrs?community=oak").get_data(as_text=True)
    assert "Sections amended by" in amended and "on 2005-06-01" in amended
    newer = client.get("/documents/guidelines-2020?community=oak").get_data(as_text=True)
    assert "Supersedes" in newer and "in force from 2010-03-01" in newer
    timeline = client.get("/timeline?community=oak").get_data(as_text=True)
    order = [
        timeline.index(f"<code>{d}</code>") for d in ("ccrs", "second-amendment", "guidelines-2010", "guidelines-2020")
    ]
    assert order == sorted(order)
    listing = client.get("/documents?community=oak").get_data(as_text=True)
    assert "2005-06-01" in listing and 'name="effective_date"' in listing


def test_the_cli_and_a_manifest_take_effective_dates(make_database, tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", make_database("asofcli"))
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path))
    (tmp_path / "ccrs.md").write_text(DECLARATION)
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "amendment.md").write_text(AMENDMENT)
    runner = CliRunner()
    bad = runner.invoke(
        main, ["ingest", str(tmp_path / "ccrs.md"), "--document-type", "ccr", "--effective-date", "1990-02-30"]
    )
    assert bad.exit_code != 0 and "--effective-date" in bad.output and "Traceback" not in bad.output
    done = runner.invoke(
        main, ["ingest", str(tmp_path / "ccrs.md"), "--document-type", "ccr", "--effective-date", "1990-01-01"]
    )
    assert done.exit_code == 0, done.output
    entry = {
        "file": "amendment.md",
        "document_id": "amendment",
        "document_type": "ccr",
        "amends": [{"document_id": "ccrs", "sections": ["Article VII Section 4"]}],
    }
    (folder / "manifest.json").write_text(json.dumps({"documents": [{**entry, "effective_date": "1989-01-01"}]}))
    early = runner.invoke(main, ["ingest", str(folder)])
    assert early.exit_code != 0 and "effective_date: " in early.output and "before 'ccrs' took effect" in early.output
    (folder / "manifest.json").write_text(json.dumps({"documents": [{**entry, "effective_date": "2005-06-01"}]}))
    assert runner.invoke(main, ["ingest", str(folder)]).exit_code == 0
    listed = runner.invoke(main, ["documents", "list"]).output.splitlines()
    columns = listed[0].split("\t")
    rows = {line.split("\t")[0]: dict(zip(columns, line.split("\t"))) for line in listed[1:]}
    assert rows["ccrs"]["effective_date"] == "1990-01-01" and rows["amendment"]["effective_date"] == "2005-06-01"
    # and a developer asks as of a date as the webhook does
    before = runner.invoke(main, ["ask", PETS, "--as-of", "2000-01-01"])
    assert before.exit_code == 0, before.output
    assert "No animals, livestock or poultry" in json.loads(before.output)["context"]
    assert "Up to four hens" not in json.loads(before.output)["context"]
    assert "Up to four hens" in json.loads(runner.invoke(main, ["ask", PETS, "--as-of", "2010-01-01"]).output)["context"]
    wrong = runner.invoke(main, ["ask", PETS, "--as-of", "2010-02-30"])
    assert wrong.exit_code != 0 and "--as-of" in wrong.output and "Traceback" not in wrong.output


def test_mcp_takes_as_of_and_names_dates(dated):
    _, _, runtime = dated
    face = McpFace.build(runtime)

    async def call(arguments: dict) -> object:
        async with Client(build_server(face)) as client:
            return await client.call_tool(SEARCH_TOOL, {"query": FENCE, "community": "oak", **arguments})

    try:
        before = anyio.run(call, {"as_of": "2015-06-30"})
        bad = anyio.run(call, {"as_of": "2015-06-31"})
    finally:
        face.knowledge.close()
    assert not before.is_error and "four feet" in before.structured_content["context"]
    old = next(c for c in before.structured_content["chunks"] if c["document_id"] == "guidelines-2010")
    assert old["effective_date"] == "2010-03-01" and old["replaced"]["effective_date"] == "2020-01-01"
    assert bad.is_error and "as_of" in bad.content[0].text


def test_dify_takes_as_of_in_metadata_condition(dated):
    _, client, _ = dated

    def post(conditions: list[dict], logical: str = "and") -> dict:
        return client.post(
            "/retrieval",
            json={"knowledge_id": "oak", "query": FENCE, "retrieval_setting": {"top_k": 5, "score_threshold": 0},
                  "metadata_condition": {"logical_operator": logical, "conditions": conditions}},
        ).get_json()

    before = post([{"name": "as_of", "comparison_operator": "is", "value": "2015-06-30"}])
    assert "four feet" in before["records"][0]["content"]
    assert before["records"][0]["metadata"]["effective_date"] == "2010-03-01"
    assert before["records"][0]["metadata"]["replaced"]["document_id"] == "guidelines-2020"
    now = post([{"name": "document_type", "comparison_operator": "is", "value": "design_guidelines"}])
    assert "six feet" in now["records"][0]["content"]
    # the date and a filter together; an invalid date names it
    both = post([{"name": "as_of", "comparison_operator": "=", "value": "2015-06-30"},
                 {"name": "document_type", "comparison_operator": "is", "value": "ccr"}])
    assert both["records"] and {r["metadata"]["document_type"] for r in both["records"]} == {"ccr"}
    bad = post([{"name": "as_of", "comparison_operator": "is", "value": "June 2015"}])
    assert bad["error_code"] == 422 and bad["error_msg"].startswith("metadata_condition.as_of")


@pytest.mark.parametrize("later_first", [False, True])
def test_a_section_amended_twice_is_out_of_force_from_the_first_amendment(make_database, embedder, later_first):
    db = Database(make_database("asoftwice"))
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    trailers = (Amendment("ccrs", ("Article VII Section 5",)),)
    first = _doc(ingestor, "# Trailer Amendment\n\nArticle VII, Section 5 is replaced: trailers may be parked "
                 "behind the building line for up to seven days.\n", document_id="trailers-2005",
                 document_type="ccr", effective_date=date(2005, 1, 1), amends=trailers)
    second = _doc(ingestor, "# Second Trailer Amendment\n\nArticle VII, Section 5 is replaced: trailers may be "
                  "parked behind the building line for up to three days.\n", document_id="trailers-2015",
                  document_type="ccr", effective_date=date(2015, 1, 1), amends=trailers)
    ingestor.write([_doc(ingestor, DECLARATION, document_id="ccrs", document_type="ccr",
                         effective_date=date(1990, 1, 1))])
    for doc in (second, first) if later_first else (first, second):
        ingestor.write([doc])
    with db.connect() as conn:
        marks = {r[0] for r in conn.execute("select metadata ->> 'amended_by' from knowledge_chunks "
                                            "where document_id = 'ccrs' and section_path like '%Section 5%'")}
        in_force = dict(conn.execute(
            "select d, arc_in_force(c.id, d) from knowledge_chunks c, "
            "unnest(array['2004-12-31', '2005-01-01', '2016-01-01']::date[]) d "
            "where c.document_id = 'ccrs' and c.section_path like '%Section 5%'").fetchall())
    db.close()
    assert marks == {"trailers-2005"}
    assert in_force == {date(2004, 12, 31): True, date(2005, 1, 1): False, date(2016, 1, 1): False}


def test_as_of_a_date_a_neighbour_in_an_amended_section_stays_out():
    from worker.models import ChunkResult
    from worker.retrieve.in_force import neighbours_in_force
    from worker.store.search import DocumentDate

    def chunk(i: int, amended_by: str | None) -> ChunkResult:
        return ChunkResult(id=i, document_id="ccrs", document_name="CC&Rs", document_type="ccr", section_path="",
                           page_number=None, chunk_index=i, is_binding=True, superseded_by=None, content="x",
                           token_count=1, amended_by=amended_by)

    dates = {"a-2005": DocumentDate("a-2005", "Amendment 2005", date(2005, 6, 1)),
             "undated": DocumentDate("undated", "Undated amendment", None)}
    def found() -> list[ChunkResult]:  # fetched afresh for each chunk, as the pipeline does
        return [chunk(1, None), chunk(2, "a-2005"), chunk(3, "undated"), chunk(4, "deleted")]

    kept = neighbours_in_force(found(), date(2000, 1, 1), dates)
    assert [c.id for c in kept] == [1, 2, 4]
    assert kept[1].amended_by is None and kept[1].replaced.effective_date == date(2005, 6, 1)
    assert [c.id for c in neighbours_in_force(found(), date(2010, 1, 1), dates)] == [1, 4]


YARD_RULES = """# Yard Rules

## Backyard structures

A backyard shed, playhouse or greenhouse must stand five feet from the lot line, and a backyard
structure's roof must match the colors of the house.
"""


def _amended(make_database, embedder, tmp_path, other: tuple[str, str], amendment: tuple[str, str]):
    """The declaration (1990), ``other`` (text, id; 1995) and ``amendment`` (text, id; 2005, of
    Article VII Section 4): the database and a webhook client on it."""
    db = Database(make_database("asofamended"))
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    ingestor.write(
        [
            _doc(ingestor, DECLARATION, document_id="ccrs", document_type="ccr", effective_date=date(1990, 1, 1)),
            _doc(ingestor, other[0], document_id=other[1], document_type="other", effective_date=date(1995, 1, 1)),
            _doc(
                ingestor,
                amendment[0],
                document_id=amendment[1],
                document_type="ccr",
                effective_date=date(2005, 6, 1),
                amends=(Amendment("ccrs", ("Article VII Section 4",)),),
            ),
        ]
    )
    return db, create_app(runtime=Runtime(make_settings(tmp_path, db.url), db, embedder)).test_client()


def test_as_of_a_date_the_section_a_later_amendment_rewrote_answers_in_its_words(make_database, embedder, tmp_path):
    """A question put in the words of the rule in force today ("hens in a backyard coop") asked as
    of a day before that rule: the section it later rewrote answers first, ahead of a passage that
    only shares the question's words."""
    db, client = _amended(make_database, embedder, tmp_path, (YARD_RULES, "yard-rules"), (AMENDMENT, "second-amendment"))
    question = "Can I keep hens in a backyard coop?"
    before = client.post("/webhook/arc-retrieval", json={"query": question, "as_of": "2000-01-01"}).get_json()
    first = next(c for c in before["chunks"] if c["source"] == 1)
    assert "poultry of any kind" in first["content"], [(c["document_id"], c["final_score"]) for c in before["chunks"]]
    assert "second-amendment" not in {c["document_id"] for c in before["chunks"]}
    after = client.post("/webhook/arc-retrieval", json={"query": question, "as_of": "2010-01-01"}).get_json()
    assert "Up to four hens" in next(c for c in after["chunks"] if c["source"] == 1)["content"]
    assert not any("poultry of any kind" in c["content"] for c in after["chunks"])
    db.close()


def test_only_a_section_amended_after_the_date_takes_its_amendments_better_match():
    from worker.models import ChunkResult, Replacement
    from worker.retrieve.in_force import stand_in_for_later_amendments

    def chunk(i: int, document_id: str, fused: float, replaced: Replacement | None = None) -> ChunkResult:
        return ChunkResult(id=i, document_id=document_id, document_name=document_id, document_type="ccr",
                           section_path="", page_number=None, chunk_index=i, is_binding=True, superseded_by=None,
                           content="x", token_count=1, fused_score=fused, vector_score=fused, replaced=replaced)

    later = Replacement(how="amended", document_id="a-2005", effective_date=date(2005, 6, 1))
    earlier = Replacement(how="amended", document_id="a-1995", effective_date=date(1995, 1, 1))
    superseded = Replacement(how="superseded", document_id="a-2005", effective_date=date(2005, 6, 1))
    in_force = [chunk(1, "ccrs", 0.2, later), chunk(2, "ccrs", 0.9, later), chunk(3, "ccrs", 0.2, earlier),
                chunk(4, "old-rules", 0.2, superseded), chunk(5, "ccrs", 0.3)]
    unfiltered = [chunk(10, "a-2005", 0.4), chunk(11, "a-2005", 0.7), chunk(12, "a-1995", 0.8)]
    lifted = {c.id: (c.fused_score, c.vector_score) for c in stand_in_for_later_amendments(in_force, unfiltered,
                                                                                           date(2000, 1, 1))}
    # the amendment's best chunk lends its match; a better own match, an amendment already in force
    # by then, a superseded document and a chunk nothing replaced keep theirs
    assert lifted == {1: (0.7, 0.7), 2: (0.9, 0.9), 3: (0.2, 0.2), 4: (0.2, 0.2), 5: (0.3, 0.3)}


LIVESTOCK_SHOW = """# Community Events

## County fair

Residents who raise or breed livestock or poultry may show them at the county fair; the
Association rents a trailer to carry the animals there each summer.
"""

ONE_LINE_AMENDMENT = """# Third Amendment to the Declaration

Article VII, Section 4 of the Declaration is hereby deleted in its entirety and replaced with the
following: Up to four hens per lot.
"""


def test_as_of_a_date_a_one_line_amendment_answers_in_its_sections_words(make_database, embedder, tmp_path):
    """A question in the words of the original rule, asked as of a day after a one-line amendment
    replaced it: the amendment answers first (the section is out of force that day), ahead of a
    passage that only shares the question's words."""
    db, client = _amended(
        make_database, embedder, tmp_path, (LIVESTOCK_SHOW, "events"), (ONE_LINE_AMENDMENT, "third-amendment")
    )
    question = "May animals, livestock or poultry be raised, bred or kept on a lot?"
    after = client.post("/webhook/arc-retrieval", json={"query": question, "as_of": "2010-01-01"}).get_json()
    first = next(c for c in after["chunks"] if c["source"] == 1)
    assert first["document_id"] == "third-amendment", [(c["document_id"], c["final_score"]) for c in after["chunks"]]
    assert not any("poultry of any kind" in c["content"] for c in after["chunks"])
    before = client.post("/webhook/arc-retrieval", json={"query": question, "as_of": "2000-01-01"}).get_json()
    assert "poultry of any kind" in next(c for c in before["chunks"] if c["source"] == 1)["content"]
    assert "third-amendment" not in {c["document_id"] for c in before["chunks"]}
    db.close()


def test_only_an_amendment_in_force_takes_the_match_of_a_section_it_replaced():
    from worker.models import ChunkResult
    from worker.retrieve.in_force import amendments_take_their_sections_match

    def chunk(i: int, document_id: str, fused: float, amended_by: str | None = None) -> ChunkResult:
        return ChunkResult(id=i, document_id=document_id, document_name=document_id, document_type="ccr",
                           section_path="", page_number=None, chunk_index=i, is_binding=True, superseded_by=None,
                           content="x", token_count=1, fused_score=fused, vector_score=fused, amended_by=amended_by)

    in_force = [chunk(1, "a-2005", 0.2), chunk(2, "a-2005", 0.3), chunk(3, "a-1995", 0.9), chunk(4, "rules", 0.1),
                chunk(5, "ccrs", 0.4)]
    # the sections a-2005 and a-1995 amended (out of force that day), and one a-2020 amended (not
    # among the candidates: not in force yet, so its section is among them)
    unfiltered = [chunk(10, "ccrs", 0.6, "a-2005"), chunk(11, "ccrs", 0.8, "a-2005"), chunk(12, "ccrs", 0.5, "a-1995"),
                  chunk(5, "ccrs", 0.4, "a-2020"), *in_force]
    lifted = {c.id: (c.fused_score, c.vector_score) for c in amendments_take_their_sections_match(in_force, unfiltered)}
    # the amendment's best chunk takes its best section's match; its other chunk, an amendment
    # already matching better and chunks that replaced nothing keep theirs
    assert lifted == {1: (0.2, 0.2), 2: (0.8, 0.8), 3: (0.9, 0.9), 4: (0.1, 0.1), 5: (0.4, 0.4)}


ARCHITECTURE_DECLARATION = """# Declaration of Covenants

## ARTICLE XII Architectural Control

No building, fence, wall or other structure shall be erected upon the Properties, nor shall any
exterior addition to or change or alteration therein be made, until the plans showing its nature,
shape, height and materials have been approved in writing by the Board as to harmony of external
design with surrounding structures.

## ARTICLE XIII General Restrictions

### Section 8.

Paint cans, fuel tanks and other containers shall be kept inside a garage or screened from view of
the street and neighboring lots.

### Section 9.

No sign of any kind shall be displayed to the public view on any lot except one sign of not more
than five square feet advertising the property for sale.
"""

COLOR_RESOLUTION = """# Resolution Regarding Architectural Control Standards

WHEREAS, Article XII of the Declaration reserves the right of architectural approval to the Board
of Directors of the Association.

RESOLVED, that each Owner may paint the house any of the colors and color combinations already in
use on comparable homes in the community.
"""


def test_as_of_a_date_before_a_later_rule_the_section_it_cites_answers(make_database, embedder, tmp_path):
    """A question in the words of a board rule adopted later ("colors"), asked as of a day before
    it: the declaration's section that rule names as its basis answers first, ahead of a passage
    that only shares the question's words; from the rule's date the rule itself answers."""
    db = Database(make_database("asofcited"))
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    ingestor.write(
        [
            _doc(ingestor, ARCHITECTURE_DECLARATION, document_id="ccrs", document_type="ccr",
                 effective_date=date(1985, 5, 20)),
            _doc(ingestor, COLOR_RESOLUTION, document_id="color-resolution", document_type="design_guidelines",
                 effective_date=date(2018, 5, 21)),
        ]
    )
    client = create_app(runtime=Runtime(make_settings(tmp_path, db.url), db, embedder)).test_client()
    question = "What colors may I paint the outside of my house?"
    before = client.post("/webhook/arc-retrieval", json={"query": question, "as_of": "2000-01-01"}).get_json()
    first = next((c["content"] for c in before["chunks"] if c["source"] == 1), "")
    assert "harmony of external design" in first, (before["status"], [
        (c["section_path"], c["source"], c["final_score"]) for c in before["chunks"]
    ])
    assert "color-resolution" not in {c["document_id"] for c in before["chunks"]}
    after = client.post("/webhook/arc-retrieval", json={"query": question, "as_of": "2019-01-01"}).get_json()
    assert "color combinations" in next(c for c in after["chunks"] if c["source"] == 1)["content"]
    db.close()


def test_only_a_section_a_later_document_cites_takes_its_match():
    from worker.models import ChunkResult
    from worker.retrieve.in_force import cited_sections_stand_in_for_later_documents

    def chunk(i: int, document_id: str, name: str, path: str, fused: float, effective: date | None = None,
              content: str = "x") -> ChunkResult:
        return ChunkResult(id=i, document_id=document_id, document_name=name, document_type="ccr",
                           section_path=path, page_number=None, chunk_index=i, is_binding=True, superseded_by=None,
                           content=content, token_count=1, fused_score=fused, vector_score=fused,
                           effective_date=effective)

    in_force = [
        chunk(1, "ccrs", "Declaration", "ARTICLE XII Architectural Control", 0.2, date(1985, 1, 1)),
        chunk(2, "ccrs", "Declaration", "ARTICLE XII Architectural Control > Section 2", 0.9, date(1985, 1, 1)),
        chunk(3, "bylaws", "By-Laws", "ARTICLE XII Amendments", 0.2, date(1985, 1, 1)),
        chunk(4, "ccrs", "Declaration", "ARTICLE XIII General Restrictions", 0.2, date(1985, 1, 1)),
        chunk(5, "old-rules", "Rules (undated)", "", 0.1),
    ]
    unfiltered = [
        *in_force,
        # the later rule: one chunk names the section, its best chunk holds the match
        chunk(10, "rules-2018", "Rules 2018", "", 0.3, date(2018, 5, 21), "Article XII of the Declaration reserves"),
        chunk(11, "rules-2018", "Rules 2018", "", 0.7, date(2018, 5, 21), "colors in use"),
        # in force that day already: its citation lifts nothing
        chunk(12, "rules-1990", "Rules 1990", "", 0.8, date(1990, 1, 1), "Article XIII of the Declaration"),
        # undated: in force from the beginning, never later
        chunk(13, "undated", "Guide", "", 0.8, None, "Article XIII of the Declaration"),
    ]
    lifted = {c.id: (c.fused_score, c.vector_score) for c in cited_sections_stand_in_for_later_documents(
        in_force, unfiltered, date(2000, 1, 1))}
    # the Declaration's Article XII takes the later rule's best match (not the By-Laws' Article XII);
    # a better own match and sections nothing later names keep theirs
    assert lifted == {1: (0.7, 0.7), 2: (0.9, 0.9), 3: (0.2, 0.2), 4: (0.2, 0.2), 5: (0.1, 0.1)}
    # from the rule's date on it answers itself: nothing is lifted
    assert [c.fused_score for c in cited_sections_stand_in_for_later_documents(
        in_force, unfiltered, date(2019, 1, 1))] == [0.2, 0.9, 0.2, 0.2, 0.1]


MEETINGS_DECLARATION = """# Declaration of Covenants

## ARTICLE IV Membership and Voting

### Section 1. Votes.

Each Owner shall be a member of the Association and shall have one vote for each Lot owned; when
more than one person holds an interest in a Lot, the vote for that Lot shall be exercised as they
determine.

### Section 2. Meetings.

Special meetings of the members may be called by the President or by the Board, or upon written
request of members holding one fourth of the votes, with notice of the meeting given to every
owner at least ten days before it is held.

## ARTICLE XIII Use Restrictions

### Section 13. Business Use.

No garage sale, yard sale or similar activity may be held on any Lot.
"""

YARD_SALE_AMENDMENT = """# Amendment to the Declaration

THIS AMENDMENT is made this 1st day of July, 2013 by the Association.

## WITNESSETH

WHEREAS, the Declaration may be amended by the affirmative vote of Voting Members representing
seventy-five percent of the Class "A" votes;

WHEREAS, at least seventy-five percent of the Class "A" votes agreed at a Special Meeting held on
June 26, 2013 to approve the following Amendment to the Declaration;

## Section 13 as amended

No garage sale, yard sale or similar activity may be held on any Lot unless part of a
community-wide yard sale approved by the Board.
"""


def test_an_amendments_recitals_answer_with_it(make_database, embedder, tmp_path):
    """A question about how an amendment was adopted: the amendment's text matches it, in the
    rule's words, and its recitals (the vote, the meeting) answer it, in formal words that
    passages about votes and meetings share more of; they come into the context with it."""
    db = Database(make_database("asofrecitals"))
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    prepared = [
        _doc(ingestor, MEETINGS_DECLARATION, document_id="ccrs", document_type="ccr", effective_date=date(1998, 5, 20)),
        _doc(ingestor, YARD_SALE_AMENDMENT, document_id="amendment-2013", document_type="ccr",
             effective_date=date(2013, 7, 1)),
    ]
    ingestor.write(prepared)
    client = create_app(runtime=Runtime(make_settings(tmp_path, db.url), db, embedder)).test_client()
    question = "When did the owners vote to change the rule on yard sales, and how was that vote held?"
    for more in ({}, {"as_of": "2014-01-01"}):
        answer = client.post("/webhook/arc-retrieval", json={"query": question, "top_k": 3, **more}).get_json()
        assert "Special Meeting held on June 26, 2013" in answer["context"], (more, [
            (c["document_id"], c["section_path"], c["content"][:30], c["source"], c["final_score"])
            for c in answer["chunks"]])
    db.close()


def test_only_an_amending_instruments_recitals_take_its_best_match():
    from worker.models import ChunkResult
    from worker.retrieve.amendments import recitals_take_their_instruments_match

    def chunk(i: int, document_id: str, fused: float, content: str) -> ChunkResult:
        return ChunkResult(id=i, document_id=document_id, document_name=document_id, document_type="ccr",
                           section_path="", page_number=None, chunk_index=i, is_binding=True, superseded_by=None,
                           content=content, token_count=1, fused_score=fused, vector_score=fused)

    found = [
        chunk(1, "amendment", 0.7, "No yard sale may be held unless approved by the Board."),
        chunk(2, "amendment", 0.1, "WHEREAS, the Declaration may be amended by a vote of 75% of the owners;"),
        chunk(3, "ccrs", 0.9, "No building shall be erected until approved."),
        # a declaration's recitals say nothing of amending: they stay where they are
        chunk(4, "ccrs", 0.2, "WHEREAS, Developer is the owner of the property described in Exhibit A;"),
        # amending words without recitals stay too
        chunk(5, "ccrs", 0.3, "This Declaration may be amended by an instrument signed by 90% of the owners."),
        # a board resolution's recitals name the declaration "as amended": it amends nothing
        chunk(6, "resolution", 0.8, "RESOLVED, that each Owner may use the colors already in use."),
        chunk(7, "resolution", 0.1, "WHEREAS, the Declaration, as amended from time to time, reserves approval;"),
    ]
    lifted = {c.id: (c.fused_score, c.vector_score) for c in recitals_take_their_instruments_match(found)}
    assert lifted == {1: (0.7, 0.7), 2: (0.7, 0.7), 3: (0.9, 0.9), 4: (0.2, 0.2), 5: (0.3, 0.3), 6: (0.8, 0.8),
                      7: (0.1, 0.1)}
