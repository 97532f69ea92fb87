"""Citations point where the text is: the page a rule is printed on, the section it sits in,
and no passage made of a page's <title>."""

from __future__ import annotations

import docx

from tests.test_cli import make_pdf
from worker.ingest.chunking import chunk_blocks
from worker.ingest.readers import parse_text, read_path


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
