"""Documents as users make them read as plain words: a browser-printed PDF's ligatures and soft
hyphens, a Word file's, a PDF whose first line names it; questions are normalised the same way,
and the full-text leg takes accented and unaccented letters as one word."""

from __future__ import annotations

from pathlib import Path

import docx
import pytest

import worker
from tests.helpers import make_pdf
from worker.ingest.ingestor import Ingestor
from worker.ingest.readers import parse_pdf, read_path
from worker.models import DocumentFields
from worker.retrieve.preprocess import preprocess
from worker.store.database import Database
from worker.store.postgres_search import PostgresBackend
from worker.store.search import SearchParams
from worker.textnorm import normalise_text

# Codes the printed PDF's font maps, by its ToUnicode CMap, to U+FB01, U+FB02 and U+00AD
_MAPPED = {"\ufb01": "\\034", "\ufb02": "\\035", "\u00ad": "\\036"}


def printed_pdf(pages: list[list[str]]) -> bytes:
    """A PDF as a browser prints one: "fi" and "fl" drawn as one ligature glyph each, and soft
    hyphens where the text allows a break, all mapped back to Unicode by a ToUnicode CMap."""
    cmap = (b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /Adobe-Identity-UCS def "
            b"/CMapType 2 def 1 begincodespacerange <00> <FF> endcodespacerange "
            b"1 beginbfrange <20> <7E> <0020> endbfrange "
            b"3 beginbfchar <1C> <FB01> <1D> <FB02> <1E> <00AD> endbfchar endcmap "
            b"CMapName currentdict /CMap defineresource pop end end")

    def drawn(line: str) -> str:
        return "".join(_MAPPED.get(c, c) for c in line)

    streams = [("BT /F1 12 Tf 72 720 Td " + " ".join(f"({drawn(line)}) Tj 0 -18 Td" for line in lines)
                + " ET").encode() for lines in pages]
    count = len(streams)
    font_id, cmap_id = 3 + 2 * count, 4 + 2 * count
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               f"<< /Type /Pages /Kids [{' '.join(f'{3 + 2 * i} 0 R' for i in range(count))}] "
               f"/Count {count} >>".encode()]
    for i, stream in enumerate(streams):
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
                       f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>".encode())
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(f"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /ToUnicode {cmap_id} 0 R >>".encode())
    objects.append(b"<< /Length %d >>\nstream\n" % len(cmap) + cmap + b"\nendstream")
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


PRINTED = [["Birch Hollow Rules",
            "The \ufb01rst \ufb02oor of a resi\u00ad",
            "dential building may not be used for stor\u00adage of of\ufb01ce goods."]]


def test_a_browser_printed_pdf_reads_plain_letters(tmp_path):
    path = tmp_path / "printed.pdf"
    path.write_bytes(printed_pdf(PRINTED))
    text = " ".join(b.text for b in parse_pdf(path).blocks)
    assert "The first floor of a residential building may not be used for storage of office goods." in text
    assert not {"\ufb01", "\ufb02", "\u00ad"} & set(text)


def test_a_word_file_with_ligatures_and_soft_hyphens_reads_plain_letters(tmp_path):
    document = docx.Document()
    document.add_heading("Birch Hollow Rules", 0)
    document.add_paragraph("The \ufb01rst \ufb02oor may not hold of\ufb01ce stor\u00adage.")
    document.save(tmp_path / "rules.docx")
    text = " ".join(b.text for b in read_path(tmp_path / "rules.docx").blocks)
    assert "The first floor may not hold office storage." in text


def test_a_pdf_whose_first_line_names_it_keeps_its_first_heading(tmp_path):
    path = tmp_path / "rules.pdf"
    path.write_bytes(make_pdf([["Maple Court Design Rules", "Section 1. Container Storage",
                                "Trash containers must be stored out of view.",
                                "Section 2. Parking", "No boats may be parked in driveways."]]))
    parsed = parse_pdf(path)
    assert parsed.title == "Maple Court Design Rules"
    assert [(b.section, b.text) for b in parsed.blocks] == [
        (("Section 1. Container Storage",), "Trash containers must be stored out of view."),
        (("Section 2. Parking",), "No boats may be parked in driveways.")]


def test_questions_are_normalised_as_documents_are():
    asked = preprocess("What goes on the \ufb01rst \ufb02oor of a resi\u00addential lot?")
    assert asked.normalized == "What goes on the first floor of a residential lot?"
    assert normalise_text("\ufb01rst \ufb02oor resi\u00addential Ｆull") == "first floor residential Full"
    assert normalise_text("Facade Height") == "Facade Height"  # case kept


def test_keywords_keep_accented_words_whole():
    words = preprocess("¿Cuál es la altura máxima de una cerca en el patio?").keywords
    assert "Cuál" in words and "máxima" in words and "altura" in words
    assert not {"Cu", "xima", "l"} & set(words)


@pytest.fixture(scope="module")
def normal_db(database_factory, embedder):
    db = Database(database_factory("normalise"))
    db.migrate(embedder.dim)
    yield db
    db.close()


def test_full_text_finds_printed_ligatures_and_folds_accents(normal_db, embedder, tmp_path):
    path = tmp_path / "printed.pdf"
    path.write_bytes(printed_pdf(PRINTED))
    notes = tmp_path / "facades.md"
    notes.write_text("# Façade Rules\n\nA façade facing the street may be painted in earth tones only.\n",
                     encoding="utf-8")
    plain = tmp_path / "plain.md"
    plain.write_text("# Plain Rules\n\nA facade facing the street may be painted in earth tones only.\n",
                     encoding="utf-8")
    ingestor = Ingestor(normal_db, embedder)
    ingestor.write([ingestor.prepare_file(p, DocumentFields(document_type="other")) for p in (path, notes, plain)])
    backend = PostgresBackend(normal_db)

    def full_text(query: str) -> dict[str, float]:
        found = backend.search(SearchParams(query_text=preprocess(query).normalized, embedding=None,
                                            match_count=10, include_superseded=True))
        return {r.document_id: r.bm25_score for r in found}

    assert "printed" in full_text("first floor office storage")
    accented, unaccented = full_text("façade painted"), full_text("facade painted")
    assert set(accented) == set(unaccented) == {"facades", "plain"}
    assert accented["facades"] == pytest.approx(accented["plain"])
    assert unaccented["facades"] == pytest.approx(accented["facades"])
    assert "facades" in full_text("¿Qué colores para la fachada? façade")


def test_every_letter_folded_lies_in_the_range_the_fold_looks_for(normal_db):
    # arc_fold_accents returns text unchanged when it holds nothing between U+00C0 and U+1EF9:
    # a letter added to translate()'s list outside that range would silently stop being folded.
    source = (Path(worker.__file__).parent.parent / "sql" / "functions" / "arc_fold_accents.sql").read_text()
    folded = source.split("translate(text,")[1].split("',\n")[0]
    letters = [c for c in folded if ord(c) > 127]
    assert len(letters) > 400
    assert all(0xC0 <= ord(c) <= 0x1EF9 for c in letters)
    with normal_db.connection() as conn:
        row = conn.execute("select arc_fold_accents(%s), arc_fold_accents(%s)",
                           ("Façade “quoted” — Øresund ŁÓDŹ", "plain “quoted” — text")).fetchone()
    assert row == ("Facade “quoted” — Oresund LODZ", "plain “quoted” — text")
