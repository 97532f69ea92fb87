"""PDF and text layout: numbered rules wrapped over lines and pages stay whole items, running
headers, footers and page numbers stay out of the text, each block keeps the page it starts on."""

from __future__ import annotations

from tests.helpers import make_pdf, pdf_of_streams
from worker.ingest.chunking import is_table
from worker.ingest.readers import parse_markdown, parse_pdf, parse_text

RULES = [
    ["Maple Court Rules and Regulations", "RULES", "1. Owners must keep their lots free of",
     "debris and weeds at all times.", "2. Trash containers may be set out the evening",
     "before collection and must be put away the same day.", "3. Quiet hours are from ten in the",
     "Page 1 of 2"],
    ["Maple Court Rules and Regulations", "evening until seven in the morning, every day.",
     "4. Holiday lights may go up after Thanksgiving and", "must come down by January 31 of the",
     "following year.", "Page 2 of 2"],
]


def test_wrapped_numbered_rules_across_a_page_break(tmp_path):
    pdf = tmp_path / "rules.pdf"
    pdf.write_bytes(make_pdf(RULES))
    parsed = parse_pdf(pdf)
    texts = [b.text for b in parsed.blocks]
    assert texts == [
        "1. Owners must keep their lots free of debris and weeds at all times.",
        "2. Trash containers may be set out the evening before collection and must be put away the same day.",
        "3. Quiet hours are from ten in the evening until seven in the morning, every day.",
        "4. Holiday lights may go up after Thanksgiving and must come down by January 31 of the following year.",
    ], texts
    assert [b.page for b in parsed.blocks] == [1, 1, 1, 2]  # item 3 starts on page 1
    assert all(b.section == ("RULES",) for b in parsed.blocks), [b.section for b in parsed.blocks]


def test_running_heads_and_page_numbers_are_dropped_but_body_lines_are_not():
    pages = ["Oak Hill HOA - Design Guidelines\nFences must be cedar or black metal.\n3",
             "Oak Hill HOA - Design Guidelines\nSheds need a permit.\n4",
             "Oak Hill HOA - Design Guidelines\nRoofs are charcoal or brown.\n5"]
    parsed = parse_text("\f".join(pages))
    text = " ".join(b.text for b in parsed.blocks)
    assert "Design Guidelines" not in text and " 4" not in text
    assert [b.page for b in parsed.blocks] == [1, 2, 3]
    assert "Sheds need a permit." in text


def test_hyphenated_words_join_and_article_titles_join_their_heading():
    parsed = parse_text("ARTICLE VI\nArchitectural Control\nSection 2. Approval Required. No resi-\n"
                        "dential structure may be built without approval of the Board of Direc-\n"
                        "tors or the Architectural Control Com-\nmittee.\n")
    block = parsed.blocks[0]
    assert block.section == ("ARTICLE VI Architectural Control", "Section 2. Approval Required")
    assert "No residential structure" in block.text and "Board of Directors" in block.text
    assert block.text.endswith("Architectural Control Committee.")


def test_a_text_document_is_named_by_a_heading_that_can_name_it():
    scanned = parse_text("OF\nHERONWOOD ESTATES HOMEOWNERS ASSOCIATION\nThe name of the corporation is Heronwood.\n")
    assert scanned.title == "HERONWOOD ESTATES HOMEOWNERS ASSOCIATION"
    assert parse_text("ARTICLE I\nName\nThe name of the corporation is Heronwood.\n").title is None
    assert parse_text("BY-LAWS\nARTICLE I\nName\nThe name is Heronwood.\n").title == "BY-LAWS"


def test_a_list_split_across_chunks_keeps_its_lead_in():
    from worker.ingest.chunking import chunk_blocks
    from worker.ingest.readers import parse_markdown

    items = "\n\n".join(f"({letter}) " + f"{kind} fences anywhere on a lot, whatever their height or colour. " * 3
                        for letter, kind in zip("ABCDEF", ["Chain link", "Barbed wire", "Electric", "Razor wire",
                                                           "Stockade", "Vinyl"]))
    text = ("# Guide\n\n## 4.2 Fencing\n\nFences need approval. The following fences are prohibited:\n\n"
            + items + "\n\nA fence that was approved before 2019 may stay.")
    chunks = chunk_blocks(parse_markdown(text).blocks, lambda s: len(s.split()), max_tokens=90)
    assert len(chunks) >= 3
    with_items = [c for c in chunks if "fences anywhere" in c.content]
    assert all(c.content.startswith(("Fences need approval. The following", "The following fences are prohibited:"))
               for c in with_items), [c.content[:60] for c in chunks]
    barbed = next(c for c in chunks if "(B) Barbed wire" in c.content)
    assert "prohibited:" in barbed.content
    # the lead-in is carried for the list only: the paragraph after it does not get it
    last = chunks[-1]
    assert last.content.endswith("may stay.")
    assert all(len(c.embedding_text().split()) <= 90 for c in chunks)


def test_html_line_breaks_in_markdown_headings_and_text_are_spaces():
    parsed = parse_markdown("# Declaration\n\n## ARTICLE V<br>Architectural Control\n\n"
                            "Send requests to the Association<br/>P.O. Box 2225.\n")
    assert parsed.blocks[0].section == ("ARTICLE V Architectural Control",)
    assert parsed.blocks[0].text == "Send requests to the Association P.O. Box 2225."


def ruled_table_pdf() -> bytes:
    """A one-page PDF, written by hand, with text above and below a table drawn with ruling lines."""
    ops: list[str] = []

    def text(x: float, y: float, s: str) -> None:
        ops.append(f"BT /F1 11 Tf {x} {y} Td ({s}) Tj ET")

    for i, line in enumerate(["ARTICLE IX ENFORCEMENT", "9.1 Fines", "The Board may levy the following fines:"]):
        text(72, 720 - 18 * i, line)
    rows = [["Violation", "First notice", "Repeat"], ["Trash cans left out", "$25", "$50"],
            ["Unapproved fence", "$100", "$250"], ["Parking on the lawn", "$50", "$100"]]
    xs, top, height = [72, 272, 392, 512], 660, 20
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            text(xs[c] + 4, top - height * (r + 1) + 6, cell)
    for r in range(len(rows) + 1):
        ops.append(f"{xs[0]} {top - height * r} m {xs[-1]} {top - height * r} l S")
    for x in xs:
        ops.append(f"{x} {top} m {x} {top - height * len(rows)} l S")
    text(72, 560, "9.2 Appeals")
    text(72, 542, "An owner may appeal a fine to the Board within 30 days.")
    return pdf_of_streams([" ".join(ops).encode()])


def test_a_ruled_table_in_a_pdf_is_a_table_block_in_its_place(tmp_path):
    pdf = tmp_path / "enforcement.pdf"
    pdf.write_bytes(ruled_table_pdf())
    blocks = parse_pdf(pdf).blocks
    tables = [b for b in blocks if is_table(b.text)]
    assert len(tables) == 1, [b.text for b in blocks]
    assert tables[0].text.split("\n") == ["| Violation | First notice | Repeat |", "| --- | --- | --- |",
                                          "| Trash cans left out | $25 | $50 |", "| Unapproved fence | $100 | $250 |",
                                          "| Parking on the lawn | $50 | $100 |"]
    assert tables[0].section[-1] == "9.1 Fines" and tables[0].page == 1
    texts = [b.text for b in blocks]
    assert texts.index("The Board may levy the following fines:") < texts.index(tables[0].text)
    assert "An owner may appeal a fine to the Board within 30 days." in texts
    assert not any("Unapproved fence" in t for t in texts if t is not tables[0].text)
    # without ruling lines the same text is plain lines: nothing is taken for a table
    plain = tmp_path / "plain.pdf"
    plain.write_bytes(make_pdf([["9.1 Fines", "Violation First notice Repeat", "Unapproved fence $100 $250"]]))
    assert not any(is_table(b.text) for b in parse_pdf(plain).blocks)
