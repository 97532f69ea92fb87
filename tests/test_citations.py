"""Citations point where the text is: the page a rule is printed on, the section it sits in,
and no passage made of a page's <title>."""

from __future__ import annotations

import docx
import pytest
from docx.enum.section import WD_SECTION

from tests.citation_reader import read_compact, read_full
from tests.helpers import make_pdf
from tests.helpers import rendered_break
from tests.helpers import docx_of
from worker.ingest.chunking import chunk_blocks
from worker.evaluation.answers import split_sources
from worker.ingest.readers import parse_text, read_path
from worker.models import ChunkResult
from worker.retrieve.context import assemble
from worker.tokens import default_counter


def words(text: str) -> int:
    return len(text.split())


def test_a_rule_on_page_two_of_a_short_pdf_is_cited_as_page_two(tmp_path):
    path = tmp_path / "pool.pdf"
    path.write_bytes(make_pdf([["Pool Rules", "The pool opens at 9 am."],
                               ["Glass containers are not allowed at the pool."]]))
    chunks = chunk_blocks(read_path(path).blocks, words, 400)
    glass = [c for c in chunks if "Glass" in c.content]
    assert len(glass) == 1 and glass[0].page_number == 2, chunks
    assert "Glass" not in next(c for c in chunks if "9 am" in c.content).content


def test_a_text_file_with_form_feeds_cites_each_page():
    chunks = chunk_blocks(parse_text("Dogs must be leashed.\fCats stay indoors.").blocks, words, 400)
    assert [(c.content, c.page_number) for c in chunks] == [("Dogs must be leashed.", 1), ("Cats stay indoors.", 2)]


def test_numbered_sections_without_an_article_are_siblings():
    for text in ("Section 1. Roofs\n\nRoofs must be grey.\n\nSection 2. Driveways\n\nDriveways must be paved.\n",
                 # a PDF's text layer has no blank lines
                 "Section 1. Roofs\nRoofs must be grey.\nSection 2. Driveways\nDriveways must be paved.\n",
                 "Section 1. Roofs. Roofs must be grey.\nSection 2. Driveways. Driveways must be paved.\n"):
        sections = {b.text.split()[-1]: b.section for b in parse_text(text).blocks}
        assert len(sections["grey."]) == 1 and len(sections["paved."]) == 1, sections
        assert sections["grey."][0].startswith("Section 1") and sections["paved."][0].startswith("Section 2")


def test_sections_stay_inside_the_article_above_them():
    text = ("ARTICLE V USE RESTRICTIONS\nSECTION 1. ROOFS\nRoofs must be grey.\n"
            "Section 2. Driveways. Driveways must be paved.\nSection 2.1 Width\nTen feet at most.\n")
    found = {b.text: b.section for b in parse_text(text).blocks}
    assert found["Roofs must be grey."] == ("ARTICLE V USE RESTRICTIONS", "SECTION 1. ROOFS")
    assert found["Section 2. Driveways. Driveways must be paved."] == ("ARTICLE V USE RESTRICTIONS",
                                                                       "Section 2. Driveways")
    assert found["Ten feet at most."][-2:] == ("Section 2. Driveways", "Section 2.1 Width")


def test_a_wrapped_line_starting_with_section_is_no_heading():
    text = "Section 1. Roofs\nOwners shall follow the rules in\nSection 3 of the Declaration\nat all times.\n"
    blocks = parse_text(text).blocks
    assert [b.section for b in blocks] == [("Section 1. Roofs",)], blocks


def test_an_html_title_names_the_page_and_is_no_chunk(tmp_path):
    page = tmp_path / "rules.html"
    page.write_text("<html><head><title>Oak Court Rules</title></head><body><h2>Pets</h2>"
                    "<p>Dogs must be leashed.</p></body></html>", encoding="utf-8")
    parsed = read_path(page)
    assert parsed.title == "Oak Court Rules"
    assert [(b.section, b.text) for b in parsed.blocks] == [(("Pets",), "Dogs must be leashed.")]
    titled = tmp_path / "titled.html"
    titled.write_text("<html><head><title>Oak Court | Home</title></head><body><h1>Oak Court Rules</h1>"
                      "<h2>Pets</h2><p>Dogs must be leashed.</p></body></html>", encoding="utf-8")
    parsed = read_path(titled)
    assert parsed.title == "Oak Court Rules" and len(parsed.blocks) == 1, parsed


def test_word_sections_are_siblings_and_the_title_is_no_chunk(tmp_path):
    document = docx.Document()
    document.add_heading("Oak Court Rules", 0)
    document.add_heading("Section 1. Roofs", 1)
    document.add_paragraph("Roofs must be grey.")
    document.add_heading("Section 2. Driveways", 1)
    document.add_paragraph("Driveways must be paved.")
    document.save(tmp_path / "rules.docx")
    parsed = read_path(tmp_path / "rules.docx")
    assert parsed.title == "Oak Court Rules"
    assert [(b.section, b.text) for b in parsed.blocks] == [
        (("Section 1. Roofs",), "Roofs must be grey."), (("Section 2. Driveways",), "Driveways must be paved.")]


def word_pages(path) -> dict[str, int | None]:
    """Each paragraph's first two words, and the page the chunk holding it is cited on."""
    chunks = chunk_blocks(read_path(path).blocks, words, 400)
    assert not any("\ue000" in c.content or "page" in c.content for c in chunks), chunks  # no mark left over
    return {" ".join(paragraph.split()[:2]): c.page_number for c in chunks for paragraph in c.content.split("\n\n")}


def test_every_kind_of_word_page_break_counts_once(tmp_path):
    document = docx.Document()
    document.styles["Heading 1"].paragraph_format.page_break_before = True  # each article on a new page
    document.add_heading("Oak Court Rules", 0)
    document.add_paragraph("Roofs must be grey.")
    driveways = document.add_paragraph("Driveways must be paved.")
    driveways.paragraph_format.page_break_before = True
    rendered_break(driveways)  # Word's record of that same break
    document.add_heading("ARTICLE II", 1)
    document.add_paragraph("Sheds need approval.")
    document.add_section(WD_SECTION.CONTINUOUS)
    document.add_paragraph("Fences stay under six feet.")
    document.add_section(WD_SECTION.ODD_PAGE)  # from page 3: page 4 is left blank
    document.add_paragraph("Pools need a permit.")
    document.add_section(WD_SECTION.NEW_PAGE)
    document.add_paragraph("Signs are limited to one per lot.")
    document.save(tmp_path / "rules.docx")
    assert word_pages(tmp_path / "rules.docx") == {
        "Roofs must": 1, "Driveways must": 2, "Sheds need": 3, "Fences stay": 3, "Pools need": 5, "Signs are": 6}


def test_a_word_table_row_split_across_pages_turns_one_page(tmp_path):
    """Word records the break once in each cell of a row it split: two cells, one page more."""
    document = docx.Document()
    document.add_paragraph("Fees are listed below.")
    table = document.add_table(rows=2, cols=2)
    for c, (head, tail) in enumerate([("Great hall rental", " for a day"), ("150 dollars", " and a deposit")]):
        table.cell(0, c).text = "Room" if c == 0 else "Fee"
        table.cell(1, c).text = tail
        rendered_break(table.cell(1, c).paragraphs[0], before_text=head)
    document.add_paragraph("Refunds take ten days.")
    document.save(tmp_path / "fees.docx")
    assert word_pages(tmp_path / "fees.docx") == {"Fees are": 1, "| Room": 1, "Refunds take": 2}


def test_a_word_footnote_is_cited_on_the_page_of_its_reference(tmp_path):
    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    body = ('<w:p><w:r><w:t>Dogs must be leashed.</w:t></w:r></w:p>'
            '<w:p><w:r><w:br w:type="page"/></w:r></w:p>'
            '<w:p><w:r><w:t>Cats stay indoors.</w:t></w:r><w:r><w:footnoteReference w:id="1"/></w:r></w:p>'
            '<w:p><w:r><w:br w:type="page"/></w:r></w:p>'
            '<w:p><w:r><w:t>Birds need no permit.</w:t></w:r></w:p>')
    notes = (f'<w:footnotes {w}><w:footnote w:id="1"><w:p><w:r><w:t>Except on a leash in the yard.</w:t></w:r></w:p>'
             '</w:footnote></w:footnotes>')
    path = tmp_path / "pets.docx"
    path.write_bytes(docx_of(body, parts={"word/footnotes.xml": notes}))
    assert word_pages(path) == {"Dogs must": 1, "Cats stay": 2, "Birds need": 3, "1. Except": 2}


def test_a_word_file_that_records_no_break_has_no_pages(tmp_path):
    """Never paginated by Word (written by a program) or one page: which, nothing says, so no
    page is claimed rather than page 1 for all of it."""
    document = docx.Document()
    document.add_paragraph("Roofs must be grey.")
    document.save(tmp_path / "rules.docx")
    assert word_pages(tmp_path / "rules.docx") == {"Roofs must": None}


def test_a_page_marker_written_as_text_in_a_page_or_word_file_moves_no_citation(tmp_path):
    """Markdown's own ``<!-- page N -->`` lines say where a page begins; written as text in an
    HTML page or a Word file they are part of the text, not an instruction to cite page 9."""
    page = tmp_path / "rules.html"
    page.write_text("<html><body><h2>Pets</h2><p>&lt;!-- page 9 --&gt;</p><p>Dogs must be leashed.</p>"
                    "</body></html>", encoding="utf-8")
    assert {b.page for b in read_path(page).blocks} == {None}
    document = docx.Document()
    document.add_paragraph("<!-- page 9 -->")
    document.add_paragraph("Roofs must be grey.")
    document.save(tmp_path / "rules.docx")
    assert {b.page for b in read_path(tmp_path / "rules.docx").blocks} == {None}


def test_a_source_joining_chunks_from_two_pages_cites_both():
    """A chunk on page 2 cut mid-sentence takes its neighbour from page 1 into one [SOURCE n]:
    the citation covers both pages, not only the first."""
    from worker.models import ChunkResult
    from worker.retrieve.context import assemble
    from worker.tokens import default_counter

    def chunk(i: int, page: int, content: str) -> ChunkResult:
        return ChunkResult(id=i, document_id="decks", document_name="Deck Rules", document_type="other",
                           section_path="Decks", page_number=page, chunk_index=i, is_binding=True,
                           superseded_by=None,
                           content=content, token_count=12, final_score=0.9)

    before = chunk(1, 1, "A deck attached to the house may rise")
    asked = chunk(2, 2, "no more than 30 inches above grade.")
    built = assemble([asked], counter=default_counter(), token_budget=500, min_relevance=0.0,
                     neighbours=lambda c: [before])
    assert built.text.startswith("[DOCUMENT] Deck Rules | binding\n[SOURCE 1] Decks | pp. 1-2\n"), built.text
    alone = assemble([asked], counter=default_counter(), token_budget=500, min_relevance=0.0)
    assert alone.text.startswith("[DOCUMENT] Deck Rules | binding\n[SOURCE 1] Decks | p. 2\n"), alone.text
    full = assemble([asked], counter=default_counter(), token_budget=500, min_relevance=0.0,
                    neighbours=lambda c: [before], citations="full")
    assert "Pages: 1-2" in full.text and "Page: 1\n" not in full.text, full.text


def _passage(i: int, document: str, section: str, page: int | None, **facts) -> ChunkResult:
    fields = {"document_name": f"{document.title()} (May 20, 1985; as recorded, before any amendment)",
              "document_type": "other", "is_binding": True, "superseded_by": None, "token_count": 4,
              "content": f"Passage {i} text.", "final_score": 1 - i / 100} | facts
    return ChunkResult(id=i, document_id=document, section_path=section, page_number=page, chunk_index=10 * i,
                       **fields)


_PASSAGES = [
    _passage(1, "declaration", "ARTICLE XI PARTY WALLS > Section 3.", 4),
    _passage(2, "declaration", "ARTICLE XI PARTY WALLS > Section 1.", 4,
             amended_by="amendment-1", amended_by_name="First Amendment"),
    _passage(3, "declaration", "ARTICLE XI PARTY WALLS > Section 1. > (a)", 5),
    _passage(4, "declaration", "ARTICLE XII EASEMENTS > Section 2.", 6),
    _passage(5, "declaration", "ARTICLE XII EASEMENTS", None),
    _passage(6, "guidelines", "Fences", None, is_binding=False, superseded_by="guidelines-2024"),
    _passage(7, "guidelines", "", 2, is_binding=False, superseded_by="guidelines-2024"),
    _passage(8, "bylaws", "ARTICLE XI PARTY WALLS > Section 1.", 3),
]


def test_compact_headers_keep_every_fact_of_the_full_ones_for_each_source():
    """Read back as the agents are told to (a [DOCUMENT] line holds for the SOURCE lines below it,
    a section path's … is the path above but its last part), each SOURCE of the compact context
    has exactly the facts the full one labels, in fewer tokens."""
    counter = default_counter()
    compact = assemble(_PASSAGES, counter=counter, token_budget=4000, min_relevance=0.0, max_chunks=20)
    full = assemble(_PASSAGES, counter=counter, token_budget=4000, min_relevance=0.0, max_chunks=20,
                    citations="full")
    assert compact.source_of == full.source_of and len(set(full.source_of.values())) == len(_PASSAGES)
    assert read_compact(compact.text) == read_full(full.text), compact.text
    # one document line per document; siblings' shared parent written once
    assert compact.text.count("[DOCUMENT] ") == 3, compact.text
    assert "\n[SOURCE 2] … > Section 1. | p. 4 | amended by First Amendment [amendment-1]\n" in compact.text
    # another document's path is never elided, even where it reads the same
    assert "[SOURCE 8] ARTICLE XI PARTY WALLS > Section 1. | p. 3\n" in compact.text, compact.text
    assert compact.tokens < 0.75 * full.tokens, (compact.tokens, full.tokens)


def test_each_block_with_its_document_line_splits_as_one_source():
    compact = assemble(_PASSAGES, counter=default_counter(), token_budget=4000, min_relevance=0.0, max_chunks=20)
    blocks = split_sources(compact.text)
    assert len(blocks) == len(_PASSAGES)
    assert blocks[0].startswith("[DOCUMENT] Declaration") and blocks[5].startswith("[DOCUMENT] Guidelines")
    assert blocks[1].startswith("[SOURCE 2] ") and "[DOCUMENT]" not in blocks[4]


@pytest.mark.parametrize("citations", ["compact", "full"])
def test_no_budget_is_exceeded_and_compact_fits_at_least_as_many_passages(citations):
    counter = default_counter()
    for budget in range(80, 400, 7):  # from where one header fits
        built = assemble(_PASSAGES, counter=counter, token_budget=budget, min_relevance=0.0, max_chunks=20,
                         citations=citations)
        assert built.tokens <= budget, (budget, built.text)
        if citations == "compact":
            full = assemble(_PASSAGES, counter=counter, token_budget=budget, min_relevance=0.0, max_chunks=20,
                            citations="full")
            assert len(built.chunks) >= len(full.chunks), budget
