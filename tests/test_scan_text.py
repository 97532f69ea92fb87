"""Scanned text read right: a compound hyphenated across a line break keeps its hyphen, a word
broken across one is rejoined, and a heading whose numeral the OCR misread still names its
section, so a section-level amendment marks the scan's chunks too."""

from __future__ import annotations

from worker.sections import amends, section_key
from worker.ingest.readers import parse_text


def text_of(raw: str) -> str:
    return " ".join(b.text for b in parse_text(raw).blocks)


def test_a_compound_broken_at_a_line_end_keeps_its_hyphen():
    text = text_of("Section 3. Height. No two-\nstory accessory building and no single-\nfamily dwelling "
                   "shall exceed thirty-\nfive feet, and no resi-\ndential fence may be built by the Direc-\ntors.\n")
    assert "two-story accessory" in text and "twostory" not in text
    assert "single-family dwelling" in text and "thirty-five feet" in text
    assert "residential fence" in text and "Directors." in text


def test_the_document_s_own_spelling_decides():
    # the document writes "backyard" elsewhere, so a "back-" broken at a line end is that word;
    # it writes "co-owner" elsewhere, so "co-" + "owner" keeps the hyphen
    text = text_of("A backyard fence needs approval. A shed in the back-\nyard needs approval too. "
                   "Each co-owner signs.\nThe co-\nowner of a Lot may vote.\n")
    assert "in the backyard needs" in text
    assert "The co-owner of a Lot" in text


def test_misread_numerals_in_scanned_headings_still_give_the_section():
    assert section_key("ARTICLE JX Assessments > Section 4.") == (("article", "9"), ("section", "4"))
    assert section_key("ARTICLE V1I Use Restrictions") == (("article", "7"),)
    assert section_key("ARTICLE X|V Miscellaneous") == (("article", "14"),)
    assert amends("Article IX Section 4", "ARTICLE JX Assessments > Section 4. Effect of Nonpayment")
    # a lettered part and plain numbers are read as before
    assert section_key("Exhibit J") == (("exhibit", "j"),)
    assert section_key("Article 12, Section 3") == (("article", "12"), ("section", "3"))


def test_a_scanned_heading_with_a_misread_numeral_is_marked_by_the_amendment(make_database, embedder):
    from worker.store.database import Database
    from worker.ingest.ingestor import Ingestor
    from worker.models import Amendment, DocumentFields
    from worker.ingest.readers import parse_markdown

    db = Database(make_database("scanamend"))
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    scan = parse_text("DECLARATION OF COVENANTS\nARTICLE JX\nAssessments\nSection 4. Effect of Nonpayment. "
                      "Any assessment not paid within thirty (30) days shall bear interest.\n")
    amendment = parse_markdown("# First Amendment\n\nArticle IX, Section 4 of the Declaration is deleted and "
                               "replaced: any assessment not paid within sixty (60) days shall bear interest.\n")
    ingestor.write([ingestor.prepare_text(scan,
                                          DocumentFields(document_id="ccrs", name="Declaration", document_type="ccr"))])
    ingestor.write([ingestor.prepare_text(amendment,
                                          DocumentFields(document_id="amendment-1", name="First Amendment",
                                                         document_type="ccr",
                                                         amends=(Amendment("ccrs", ("Article IX Section 4",)),)))])
    with db.connect() as conn:
        marks = conn.execute("select section_path, metadata ->> 'amended_by' from knowledge_chunks "
                             "where document_id = 'ccrs'").fetchall()
    db.close()
    assert any(by == "amendment-1" for _, by in marks), marks
