"""Word (.docx) files into Markdown, through mammoth's HTML and :mod:`.html`.

This runs in the converter child (:mod:`worker.ingest.convert_child`), bounded in memory and time.
"""

from __future__ import annotations

from pathlib import Path

from ..bounds import DEFAULT_LIMITS, ReadLimits, check_docx
from .html import html_to_markdown


def docx_to_markdown(path: Path, limits: ReadLimits = DEFAULT_LIMITS) -> str:
    """A Word document through mammoth's semantic HTML (its headings, lists and tables), then as
    HTML above; the Title style is the document's title, and ``<!-- page N -->`` markers say
    where its pages begin (:mod:`worker.ingest.docx_pages`)."""
    import zipfile
    from xml.etree.ElementTree import ParseError

    import mammoth

    from ..docx_pages import marked_pages

    check_docx(path, limits)
    # Images are left out: mammoth inlines each as base64 text, memory for nothing retrievable.
    no_images = mammoth.images.img_element(lambda image: {"alt": image.alt_text or ""})
    try:
        with marked_pages(path) as (marked, pages), marked.open("rb") as fh:
            html = mammoth.convert_to_html(
                fh, style_map="p[style-name='Title'] => h1:fresh", convert_image=no_images
            ).value
    except (zipfile.BadZipFile, KeyError, ParseError) as exc:
        raise ValueError(f"not a readable Word (.docx) file ({type(exc).__name__})") from None
    # mammoth nests a list's levels as <ol>s that the XML wrote flat, so the limit applies again
    return pages.restore(html_to_markdown(html, limits.max_nesting, what="the Word file's lists and tables"))
