"""A confirmation follows its passage and is never a stale rule: a re-ingest that keeps the
passage's text keeps it (under the chunk's new id); a changed or removed passage, a deleted or
superseded document, or a section an amendment replaces makes it stale, and a stale one is never
served. Real Postgres, the real model, the webhooks over Flask."""

from __future__ import annotations

import pytest

from tests.helpers import make_settings
from worker.runtime import Runtime
from worker.serve.app import create_app
from worker.store.database import Database

ADMIN_TOKEN = "admin-token-0123456789abcdef"
ASK_TOKEN = "ask-token-0123456789abcdefgh"
ADMIN = {"X-ARC-Token": ADMIN_TOKEN}
ASK = {"X-ARC-Token": ASK_TOKEN}
PETS = "No animals, livestock or poultry of any kind shall be raised, bred or kept on any lot"
QUESTION = "Can I keep chickens on my lot?"

DECLARATION = f"""# Declaration of Covenants

## ARTICLE VII Use Restrictions

### Section 4.

{PETS}, except that dogs, cats or other household pets may be kept provided they are not kept for
commercial purposes.

### Section 5.

No trailer, boat or recreational vehicle shall be parked in front of the building line of any lot.

### Section 14.

Each owner shall landscape the front yard within nine months of closing.
"""

AMENDMENT = """# Second Amendment to the Declaration

Article VII, Section 4 of the Declaration is hereby deleted in its entirety and replaced with the
following: Up to four hens, and no roosters, may be kept in a backyard coop on any lot; no other
livestock or poultry shall be raised, bred or kept.
"""


@pytest.fixture()
def keeper(make_database, embedder, tmp_path):
    url = make_database("stale")
    db = Database(url)
    db.migrate(embedder.dim)
    settings = make_settings(tmp_path, url, api_token=ASK_TOKEN, ingest_token=ADMIN_TOKEN)
    client = create_app(runtime=Runtime(settings, db, embedder)).test_client()
    ingest(client, "ccrs", DECLARATION)
    yield client
    db.close()


def ingest(client, document_id: str, text: str, **more) -> dict:
    sent = client.post(
        "/webhook/arc-ingest",
        headers=ADMIN,
        json={"document_id": document_id, "document_type": "ccr", "text": text, **more},
    )
    assert sent.status_code == 200, sent.get_json()
    return sent.get_json()


def pets_chunk(client) -> int:
    shown = client.get("/webhook/arc-documents/ccrs", headers=ADMIN).get_json()
    return next(c["id"] for c in shown["chunks"] if PETS in c["content"])


def confirm(client) -> dict:
    made = client.post("/webhook/arc-confirm", headers=ADMIN, json={"query": QUESTION, "chunk_id": pets_chunk(client)})
    assert made.status_code == 201 and made.get_json()["state"] == "confirmed"
    assert served(client) == made.get_json()["id"]  # the very question takes it
    return made.get_json()


def listed(client, confirmation_id: int) -> dict:
    found = client.get("/webhook/arc-confirm", headers=ADMIN).get_json()["confirmations"]
    return next(c for c in found if c["id"] == confirmation_id)


def served(client) -> int | None:
    answer = client.post("/webhook/arc-retrieval", headers=ASK, json={"query": QUESTION}).get_json()
    return answer["confirmed"]["id"] if answer["confirmed"] else None


def assert_stale(client, made: dict, reason: str) -> None:
    now = listed(client, made["id"])
    assert now["state"] == "stale" and reason in now["reason"], now
    assert now["chunk_id"] is None
    assert served(client) is None  # never served, in this process ...
    other = create_app(runtime=client.application.extensions["arc"].runtime).test_client()
    assert served(other) is None  # ... nor in another that reads the same database


def test_a_re_ingest_that_keeps_the_passage_keeps_the_confirmation(keeper):
    made = confirm(keeper)
    ingest(keeper, "ccrs", DECLARATION.replace("nine months", "twelve months"))  # another section changes
    now = listed(keeper, made["id"])
    assert now["state"] == "confirmed" and now["chunk_id"] == pets_chunk(keeper) != made["chunk_id"]
    assert served(keeper) == made["id"]


def test_a_changed_passage_makes_it_stale(keeper):
    made = confirm(keeper)
    ingest(keeper, "ccrs", DECLARATION.replace("or poultry of any kind", "of any kind"))
    assert_stale(keeper, made, "the passage changed")
    # the keeper is shown today's best passage for the question, to confirm again
    assert listed(keeper, made["id"])["candidate"]["document_id"] == "ccrs"


def test_a_removed_passage_makes_it_stale(keeper):
    made = confirm(keeper)
    ingest(
        keeper,
        "ccrs",
        DECLARATION.split("### Section 4.")[0] + "### Section 5." + DECLARATION.split("### Section 5.")[1],
    )
    assert_stale(keeper, made, "the passage changed or was removed")


def test_a_deleted_document_makes_it_stale(keeper):
    made = confirm(keeper)
    assert keeper.delete("/webhook/arc-documents/ccrs", headers=ADMIN).status_code == 200
    ingest(keeper, "rules", "# Rules\n\nQuiet hours are from 10 pm to 7 am.")  # the community stays
    assert_stale(keeper, made, "the document was deleted")


def test_a_superseded_document_makes_it_stale(keeper):
    made = confirm(keeper)
    ingest(
        keeper,
        "ccrs-2025",
        DECLARATION.replace("Covenants", "Covenants (restated 2025)"),
        supersedes="ccrs",
        allow_duplicate=True,
    )
    assert_stale(keeper, made, "superseded by ccrs-2025")


def test_an_amendment_replacing_its_section_makes_it_stale(keeper):
    made = confirm(keeper)
    ingest(
        keeper, "second-amendment", AMENDMENT, amends=[{"document_id": "ccrs", "sections": ["Article VII Section 4"]}]
    )
    assert_stale(keeper, made, "an amendment replaces its section: second-amendment")


def test_a_none_goes_stale_when_the_community_gains_a_document(keeper):
    question = "Can I keep bees on my lot?"
    made = keeper.post("/webhook/arc-confirm", headers=ADMIN, json={"query": question, "answer": "none"}).get_json()
    assert made["state"] == "confirmed"
    before = keeper.post("/webhook/arc-retrieval", headers=ASK, json={"query": question}).get_json()
    assert before["status"] == "no_results" and before["confirmed"]["id"] == made["id"]
    # a re-ingest of a document it was made against keeps it ...
    ingest(keeper, "ccrs", DECLARATION.replace("nine months", "twelve months"))
    assert listed(keeper, made["id"])["state"] == "confirmed"
    # ... a new document may address the question: stale, never served, shown with today's best passage
    ingest(keeper, "beekeeping-policy", "# Beekeeping Policy\n\nUp to two hives of bees may be kept in a rear yard.")
    now = listed(keeper, made["id"])
    assert now["state"] == "stale" and "gained a document since: beekeeping-policy" in now["reason"], now
    assert now["candidate"] is not None
    after = keeper.post("/webhook/arc-retrieval", headers=ASK, json={"query": question}).get_json()
    assert after["confirmed"] is None
