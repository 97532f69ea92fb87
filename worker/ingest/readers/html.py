"""HTML into Markdown: headings, lists and tables kept, scripts and page chrome left out.

This runs in the converter child (:mod:`worker.ingest.convert_child`), bounded in memory and time;
it imports nothing of the readers' dispatch.
"""

from __future__ import annotations

import re

from ..bounds import ReadLimits, html_too_deep
from ..links import unsafe_url

_PAGE_MARKER_IN_TEXT = re.compile(r"^[ \t]*(<!--[ \t]*page[ \t]+\d+[ \t]*-->)[ \t]*$", re.I | re.M)


def html_to_markdown(html: str, max_nesting: int = ReadLimits.max_nesting, what: str = "HTML") -> str:
    """Headings, numbered and bulleted lists and tables as Markdown (markdownify); scripts,
    styles and a page's navigation, header and footer left out. Deeper nesting than
    ``max_nesting`` is refused: markdownify recurses per element (3,000 nested divs exhausted
    Python's stack)."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    if html_too_deep(html, max_nesting):
        raise ValueError(f"{what} nested over {max_nesting} elements deep (ARC_MAX_NESTING)")
    soup = BeautifulSoup(html, "html.parser")
    # <title> names the page, it is no passage of it: the document's title unless an <h1> names it
    title = " ".join(soup.title.get_text().split()) if soup.title else ""
    for tag in soup(["title", "script", "style", "noscript", "template", "nav", "header", "footer"]):
        tag.decompose()
    for link in soup("a", href=True):
        if unsafe_url(str(link["href"])):  # href is single-valued: a str
            del link["href"]
    for image in soup("img"):
        if not (source := image.get("src")) or unsafe_url(str(source)):
            image.replace_with(str(image.get("alt") or ""))
    body = MarkdownConverter(heading_style="ATX", bullets="-", table_infer_header=True).convert_soup(soup)
    # A page's text that reads like Markdown's page marker stays text: only a Word file's own
    # breaks (restored after this, docx_pages) say where a page begins.
    body = _PAGE_MARKER_IN_TEXT.sub(r"\\\1", body)
    return f"# {title}\n\n{body}" if title and soup.find("h1") is None else body
