"""A question that names its document gets that document's passage, not a near-identical twin's.

Two condominiums of one developer keep by-laws that differ in a clause; a homeowner of one asks
about "the shops bylaws". Both passages answer the question's words; only the document's name
tells them apart (three of the misses on unseen documents were such twins)."""

from __future__ import annotations

import pytest

from tests.helpers import make_settings
from worker.ingest.ingestor import Ingestor
from worker.ingest.readers import parse_markdown
from worker.models import DocumentFields
from worker.runtime import Runtime
from worker.serve.app import create_app
from worker.store.database import Database

BYLAWS = """# Bylaws

## ARTICLE III Board of Directors

### Section 1. Number.

{number}

### Section 2. Term of Office.

Directors shall serve staggered terms of two (2) years and may be re-elected without limit.

## ARTICLE IV Meetings of Members

### Section 1. Annual Meeting.

The annual meeting of the members shall be held in March of each year at a place the Board sets.
"""

COMMON = ("Directors shall be Owners in good standing or the spouses of Owners. Vacancies on the Board caused by "
          "death, resignation or removal shall be filled by a vote of the majority of the remaining Directors, even "
          "though less than a quorum, and each person so elected shall serve out the term of the Director whom he "
          "or she replaces. No Director shall receive compensation for any service rendered to the Association, "
          "but a Director may be reimbursed for actual expenses incurred in the performance of his or her duties. ")
SHOPS = COMMON + "The affairs of the Association shall be managed by three (3) persons."
# The sister association's clause says more about the board in the question's own words.
RESIDENCES = COMMON + ("The affairs of the Association shall be managed by a Board of Directors. The Board of "
              "Directors shall have five (5) directors, and the directors need not be owners.")


@pytest.fixture(scope="module")
def twins(make_database, embedder, tmp_path_factory):
    url = make_database("twins")
    db = Database(url)
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    documents = [ingestor.prepare_text(parse_markdown(BYLAWS.format(number=text)),
                                       DocumentFields(document_id=doc_id, name=name, document_type="other"))
                 for doc_id, name, text in [
                     ("residences-bylaws", "The Residences at Harbor Point Condominium Association: Bylaws", RESIDENCES),
                     ("shops-bylaws", "The Shops at Harbor Point Condominium Association: Bylaws", SHOPS)]]
    pets = ("No animals, livestock or poultry of any kind shall be raised, bred or kept on any Lot, except that "
            "dogs, cats or other household pets may be kept provided that they are not kept for any commercial "
            "purpose. {extra}")
    for doc_id, name, extra in [
            ("master-deed", "Harbor Point Master Deed",
             "An Owner may keep no more than two pets, and pets an Owner keeps must be leashed."),
            ("declaration", "Harbor Point Declaration of Covenants, Conditions and Restrictions",
             "An Owner may keep no more than three pets.")]:
        documents.append(ingestor.prepare_text(parse_markdown(f"# {name}\n\n## ARTICLE VII Use Restrictions\n\n"
                                                              f"### Section 4. Animals.\n\n" + pets.format(extra=extra)),
                                               DocumentFields(document_id=doc_id, name=name, document_type="ccr")))
    ingestor.write(documents)
    runtime = Runtime(make_settings(tmp_path_factory.mktemp("twins"), url), db, embedder)
    yield create_app(runtime=runtime).test_client()
    db.close()


def ask(client, query: str) -> dict:
    response = client.post("/webhook/arc-retrieval", json={"query": query})
    assert response.status_code == 200, response.get_json()
    return response.get_json()


@pytest.mark.parametrize("query, named", [
    ("how many directors are on the board under the shops bylaws?", "shops-bylaws"),
    ("how many directors are on the board at the residences?", "residences-bylaws"),
    # an acronym of the name: the embedding does not read "CC&Rs" as "Covenants, Conditions and Restrictions"
    ("how many pets can an owner keep according to our CC&Rs?", "declaration"),
])
def test_the_named_association_s_passage_comes_first(twins, query, named):
    answer = ask(twins, query)
    first = answer["chunks"][0]
    assert first["document_id"] == named, [(c["document_id"], c["final_score"]) for c in answer["chunks"][:3]]
    assert first["source"] == 1
    assert answer["context"].index(first["document_name"]) < 60  # SOURCE 1 is that passage


def test_a_question_naming_no_document_keeps_the_order_of_the_passages(twins):
    # the sister's fuller clause wins on its words when the question names neither association
    answer = ask(twins, "how many directors are on the board?")
    assert answer["chunks"][0]["document_id"] == "residences-bylaws"


def test_only_words_that_tell_documents_apart_name_one():
    from worker.retrieve.naming import named_documents

    names = {"standards": "Wyndham Forest Design Standards (issue date July 2018)",
             "addendum": "Holloway at Wyndham Forest Design Standards Addendum", "bylaws": "Bylaws",
             "ccrs": "Declaration of Covenants, Conditions and Restrictions", "amend": "Amendment (August 29, 2003)"}
    # "Wyndham" and "Forest" name the same two documents: one mention, weaker than "bylaws"
    assert named_documents("according to the bylaws how many directors sit on the wyndham forest board?",
                           names) == {"bylaws"}
    assert named_documents("what do our CC&Rs say about sheds", names) == {"ccrs"}
    assert named_documents("did owners vote on the 2003 changes?", names) == {"amend"}
    assert named_documents("we're in holloway - can we use vinyl siding", names) == {"addendum"}
    assert named_documents("how tall can a fence be?", names) == set()
    # a word every candidate's name holds names none of them
    assert named_documents("fences in wyndham forest", {"a": "Wyndham Forest Bylaws",
                                                        "b": "Wyndham Forest Declaration"}) == set()
