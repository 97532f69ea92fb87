"""Word and HTML documents keep their headings, numbered lists and tables; a table is a chunk of
its own (row groups repeat the header) and reads as a table in the [SOURCE n] block."""

from __future__ import annotations

import zipfile

import pytest

from worker.ingest.chunking import chunk_blocks, is_table
from worker.ingest.readers import parse_markdown, read_path
from tests.helpers import word_document

def test_a_word_document_keeps_headings_lists_and_tables(tmp_path):
    path = tmp_path / "guidelines.docx"
    word_document(path)
    parsed = read_path(path)
    assert parsed.title == "Pinecrest Design Guidelines"
    texts = [(b.section, b.text) for b in parsed.blocks]
    assert (("Section 4 Fences",), "1. Barbed wire fences anywhere.") in texts
    assert (("Section 4 Fences",), "2. Chain link fences in front yards.") in texts
    table = next(b for b in parsed.blocks if is_table(b.text))
    assert table.section == ("Section 5 Heights",)
    assert table.text.split("\n")[0] == "| Zone | Maximum fence height |"
    assert "| Front yard | 4 feet |" in table.text.split("\n")


def test_an_html_page_keeps_its_structure_and_drops_its_chrome(tmp_path):
    path = tmp_path / "rules.html"
    path.write_text("""<html><head><style>p {color: red}</style><script>var tracking = 1;</script></head>
      <body><nav>Home | Contact</nav><h1>Maple Court Rules</h1>
      <h2>Parking</h2><p>Boats may not be parked in driveways.</p>
      <ul><li>No RVs on the street.</li><li>Guests may park for 72 hours.</li></ul>
      <h2>Fees</h2><table><thead><tr><th>Item</th><th>Fee</th></tr></thead>
      <tbody><tr><td>Late payment</td><td>$25</td></tr><tr><td>Gate remote</td><td>$40</td></tr></tbody></table>
      <footer>Copyright 2026</footer></body></html>""", encoding="utf-8")
    parsed = read_path(path)
    everything = "\n".join(b.text for b in parsed.blocks)
    assert parsed.title == "Maple Court Rules"
    assert "tracking" not in everything and "color" not in everything and "Copyright" not in everything
    assert "Home | Contact" not in everything
    assert (("Parking",), "- No RVs on the street.") in [(b.section, b.text) for b in parsed.blocks]
    table = next(b for b in parsed.blocks if is_table(b.text))
    assert table.section == ("Fees",) and "| Late payment | $25 |" in table.text


def test_a_table_is_a_chunk_of_its_own_and_long_ones_repeat_their_header():
    rows = "\n".join(f"| Lot {n} | {n * 10} feet of frontage along the greenbelt |" for n in range(1, 41))
    text = ("# Plat\n\n## Lots\n\nFrontage per lot is set out below.\n\n| Lot | Frontage |\n| --- | --- |\n"
            + rows + "\n\nFrontage was surveyed in 1982.")
    chunks = chunk_blocks(parse_markdown(text).blocks, lambda s: len(s.split()), max_tokens=120)
    tables = [c for c in chunks if is_table(c.content)]
    assert len(tables) >= 3
    assert all(c.content.startswith("| Lot | Frontage |\n| --- | --- |\n| Lot ") for c in tables)
    assert all("surveyed" not in c.content and "set out below" not in c.content for c in tables)
    assert sum(c.content.count("feet of frontage") for c in tables) == 40  # every row, once
    assert all(len(c.embedding_text().split()) <= 120 for c in chunks)


def test_a_broken_word_file_is_a_clear_error(tmp_path):
    path = tmp_path / "broken.docx"
    path.write_bytes(b"PK\x03\x04 this is not really a zip")
    with pytest.raises(ValueError, match="not a readable Word"):
        read_path(path)


def test_a_word_file_that_unpacks_to_gigabytes_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "bomb.docx"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w", force_zip64=True) as member:
            block = bytes(1 << 20)
            for _ in range(400):  # 400 MB of zeros, a few hundred KB packed
                member.write(block)
    assert path.stat().st_size < 2_000_000
    with pytest.raises(ValueError, match="unpacks to 419 MB"):
        read_path(path)

