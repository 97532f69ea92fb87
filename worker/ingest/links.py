"""Links that would run or embed something where stored text is shown (``javascript:``,
``vbscript:``, ``data:``), kept out of every document at ingest.

Chat clients and agents render the passages the worker returns as Markdown, so a link in a
passage is a link whatever the document's format was: the readers' text (Markdown, plain text,
PDF, and HTML and Word once converted) loses such links here, their words staying. A URL is
judged as a browser reads it: HTML character references decoded, tabs, newlines and other
control characters dropped, any case (``JaVa&#x09;Script:`` is ``javascript:``).
"""

from __future__ import annotations

import html
import re

UNSAFE_SCHEMES = ("javascript:", "vbscript:", "data:")

_CONTROL = re.compile(r"[\x00-\x20\x7f]+")


def unsafe_url(url: str) -> bool:
    """Whether a link's target runs or embeds something (one of :data:`UNSAFE_SCHEMES`)."""
    seen = _CONTROL.sub("", html.unescape(html.unescape(url))).strip("<>").lower()
    return seen.startswith(UNSAFE_SCHEMES)


# [words](target "title") and ![alt](target): a target in <...>, or without spaces and with
# balanced parentheses (javascript:alert(1)) one deep. Targets are taken with their tabs (a
# browser drops them), so "java<TAB>script:" is judged too.
_INLINE = re.compile(
    r"(!?)\[((?:[^\[\]\n]|\[[^\[\]\n]*\]){0,1000})\]"
    r"\( *(<[^<>\n]{0,2000}>|(?:[^ \n()]|\([^ \n()]{0,200}\)){0,2000})(?:\s+[^)\n]{0,500})?\s*\)"
)
# [label]: target (a reference definition), at a line's start or, once the readers have joined
# a paragraph's lines, within it
_REFERENCE = re.compile(r"(?:^|(?<=\s))\[[^\[\]\n]{1,1000}\]: *(<[^<>\n]{0,2000}>|[^ \n]{1,2000})", re.MULTILINE)
# <javascript:...> (an autolink, or what a lenient renderer takes for one)
_AUTOLINK = re.compile(r"<([^<> \n]{1,2000})>")
# an attribute that takes a URL, in HTML written into Markdown
_ATTRIBUTE = re.compile(
    r"""\s(?:href|src|action|formaction|xlink:href|poster|background)\s*=\s*"""
    r"""("[^"\n]{0,2000}"|'[^'\n]{0,2000}'|[^ \n>]{1,2000})""",
    re.IGNORECASE,
)


def without_unsafe_links(text: str) -> str:
    """``text`` with every unsafe link made plain: a Markdown link or image keeps its words (or
    its alt text); a reference definition (label and target) or an autolink to such a target
    goes, and so does such an attribute of HTML written into the text."""
    if ":" not in text and "&" not in text:  # an unsafe target has a colon, or writes it &#58;
        return text
    text = _INLINE.sub(lambda m: m.group(2) if unsafe_url(m.group(3)) else m.group(0), text)
    text = _REFERENCE.sub(lambda m: "" if unsafe_url(m.group(1)) else m.group(0), text)
    text = _AUTOLINK.sub(lambda m: "" if unsafe_url(m.group(1)) else m.group(0), text)
    return _ATTRIBUTE.sub(lambda m: "" if unsafe_url(m.group(1).strip("\"'")) else m.group(0), text)
