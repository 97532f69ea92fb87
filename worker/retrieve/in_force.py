"""Answering as of a date: what was in force that day, and what replaced each passage and when.

The search keeps only chunks in force on ``as_of`` (``arc_in_force`` in SQL: the document had
taken effect, its superseding document and the document amending its section had not yet). This
stage reads that view into the answer:

- every chunk that was superseded or amended names what replaced it and when
  (:attr:`ChunkResult.replaced`), whether or not ``as_of`` was given;
- as of a date, a replacement that came later did not yet count: the chunk is neither superseded
  nor amended then, so it is not demoted and its replacement is not brought up beside it;
- an undated document counts as in force from the beginning, and an answer as of a date that
  used one says so (:func:`undated_warning`);
- a date before any document took effect has nothing in force (:func:`nothing_in_force`);
- as of a date, a section a later amendment rewrote answers where that amendment matches the
  question (:func:`stand_in_for_later_amendments`): people ask in the words of the rule they know
  today, and the version in force that day is the one that should answer them;
- as of a date, an amendment in effect by then answers where the section it replaced matches the
  question (:func:`amendments_take_their_sections_match`): the original's words say what the rule
  is about, a one-line amendment ("Section 4 is deleted and replaced by ...") says only what it is
  now, and the original is out of force that day;
- as of a date, a section that a later document names as what it rests on ("Article XII of the
  Declaration reserves the right of architectural approval ...") answers where that document
  matches the question (:func:`cited_sections_stand_in_for_later_documents`): before the later
  rule, the section it was made under was the whole rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import date

from ..models import ChunkResult, Replacement
from ..sections import amends, citations, cites_into
from ..store.search import DocumentDate

# A community's documents by id: all of them with ``ids`` None (sql/functions/arc_document_dates.sql)
DatesOf = Callable[[str | None, list[str] | None], Mapping[str, DocumentDate]]


def replacing_ids(chunks: Iterable[ChunkResult]) -> list[str]:
    """The documents that superseded or amended any of ``chunks``."""
    return sorted({r for c in chunks for r in (c.superseded_by, c.amended_by) if r})


def mark_replacements(
    chunks: list[ChunkResult], dates: Mapping[str, DocumentDate], as_of: date | None
) -> list[ChunkResult]:
    """Copies of ``chunks``, each superseded or amended one naming its replacement and the day it
    took effect; as of a date, a replacement not yet in force then is only named (the chunk was
    the rule that day)."""
    marked = []
    for chunk in chunks:
        replaced = _replacement(chunk, dates)
        update: dict[str, object] = {"replaced": replaced}
        if as_of is not None and replaced is not None:
            update.update(superseded_by=None, amended_by=None, amended_by_name=None)
        marked.append(chunk.model_copy(update=update))
    return marked


# The first-stage match a chunk carries (SearchBackend.search); what a stand-in takes over.
_MATCH_FIELDS = ("vector_score", "fts_score", "bm25_score", "fused_score", "vector_rank", "fts_rank")


def later_amendments(chunks: Iterable[ChunkResult], as_of: date) -> set[str]:
    """The documents that amended one of ``chunks``' sections after ``as_of`` (read from
    :attr:`ChunkResult.replaced`, as :func:`mark_replacements` sets it)."""
    return {
        c.replaced.document_id
        for c in chunks
        if c.replaced is not None
        and c.replaced.how == "amended"
        and c.replaced.effective_date is not None
        and c.replaced.effective_date > as_of
    }


def stand_in_for_later_amendments(
    in_force: list[ChunkResult], unfiltered: Iterable[ChunkResult], as_of: date
) -> list[ChunkResult]:
    """``in_force`` (the candidates in force on ``as_of``), each section a later amendment rewrote
    taking that amendment's best match among ``unfiltered`` (the same search without a date) when
    it is better than its own: the amendment is not in force yet, so the section it replaced
    answers in its place. An amendment of several sections lends its match to each of them."""
    later = later_amendments(in_force, as_of)
    best = _best_by(unfiltered, lambda c: c.document_id if c.document_id in later else None)
    out = []
    for chunk in in_force:
        # best holds later amendments only, so a lender is one not in force on as_of
        amended = chunk.replaced is not None and chunk.replaced.how == "amended"
        lender = best.get(chunk.replaced.document_id) if amended and chunk.replaced is not None else None
        if lender is not None and (lender.fused_score or 0.0) > (chunk.fused_score or 0.0):
            chunk = chunk.model_copy(update={f: getattr(lender, f) for f in _MATCH_FIELDS})
        out.append(chunk)
    return out


def amendments_take_their_sections_match(
    in_force: list[ChunkResult], unfiltered: Iterable[ChunkResult]
) -> list[ChunkResult]:
    """``in_force`` (the candidates in force on a date), the best chunk of each amendment among
    them taking the best match of the sections it amended among ``unfiltered`` (the same search
    without a date) when that is better than its own. An amendment among the candidates had taken
    effect that day, so the sections it amended were out of force and it answers in their place;
    only chunks already in force that day are lifted, nothing enters the candidates."""
    amending = {c.document_id for c in in_force}
    kept = {c.id for c in in_force}
    originals = _best_by(unfiltered, lambda c: c.amended_by if c.amended_by in amending and c.id not in kept else None)
    best = _best_by(in_force, lambda c: c.document_id if c.document_id in originals else None)
    lifted = {c.id: originals[c.document_id] for c in best.values()}
    out = []
    for chunk in in_force:
        lender = lifted.get(chunk.id)
        if lender is not None and (lender.fused_score or 0.0) > (chunk.fused_score or 0.0):
            chunk = chunk.model_copy(update={f: getattr(lender, f) for f in _MATCH_FIELDS})
        out.append(chunk)
    return out


def cited_sections_stand_in_for_later_documents(
    in_force: list[ChunkResult], unfiltered: Iterable[ChunkResult], as_of: date
) -> list[ChunkResult]:
    """``in_force`` (the candidates in force on ``as_of``), each chunk of a section that a later
    document (one that took effect after ``as_of``) names taking that document's best match among
    ``unfiltered`` (the same search without a date) when it is better than its own.

    Board rules, resolutions and amendments name the sections they rest on or change ("Article XII
    of the Declaration reserves the right of architectural approval to the Board"), in words the
    later rule shares with the question ("colors"); before that rule took effect, the section it
    names was what governed. A section is named by its part (an article, or a numbered section
    such as 5.2) and the kind of its document ("of the Declaration", "of the By-Laws"): a cited
    section of a document of another kind is not lifted. Only the later document's chunks among
    ``unfiltered`` are read for what it names; only chunks in force that day are lifted, nothing
    enters the candidates."""
    own = {c.document_id for c in in_force}
    later = [
        c for c in unfiltered if c.document_id not in own and c.effective_date is not None and c.effective_date > as_of
    ]
    best = _best_by(later, lambda c: c.document_id)
    named: dict[str, set[tuple[str, str]]] = {}
    for chunk in later:
        named.setdefault(chunk.document_id, set()).update(citations(chunk.content))
    out = []
    for chunk in in_force:
        lenders = [
            best[document_id]
            for document_id, cited in named.items()
            if any(cites_into(kind, chunk.document_name) and amends(part, chunk.section_path) for part, kind in cited)
        ]
        lender = max(lenders, key=lambda c: c.fused_score or 0.0, default=None)
        if lender is not None and (lender.fused_score or 0.0) > (chunk.fused_score or 0.0):
            chunk = chunk.model_copy(update={f: getattr(lender, f) for f in _MATCH_FIELDS})
        out.append(chunk)
    return out


def _best_by(chunks: Iterable[ChunkResult], key: Callable[[ChunkResult], str | None]) -> dict[str, ChunkResult]:
    """For each ``key`` (None: the chunk is left out), its chunk of the best fused score."""
    best: dict[str, ChunkResult] = {}
    for chunk in chunks:
        k = key(chunk)
        if k is None:
            continue
        known = best.get(k)
        if known is None or (chunk.fused_score or 0.0) > (known.fused_score or 0.0):
            best[k] = chunk
    return best


def neighbours_in_force(found: list[ChunkResult], as_of: date, dates: Mapping[str, DocumentDate]) -> list[ChunkResult]:
    """A chunk's neighbours (its own document, in force that day) without a section an amendment
    in effect by ``as_of`` had replaced; the rest marked as :func:`mark_replacements` marks."""
    kept = [n for n in found if not n.amended_by or not _in_effect(dates.get(n.amended_by), as_of)]
    return mark_replacements(kept, dates, as_of)


def _in_effect(document: DocumentDate | None, as_of: date) -> bool:
    # as arc_in_force: an undated replacement always was; one no longer stored replaces nothing
    if document is None:
        return False
    return document.effective_date is None or document.effective_date <= as_of


def _replacement(chunk: ChunkResult, dates: Mapping[str, DocumentDate]) -> Replacement | None:
    by = chunk.superseded_by or chunk.amended_by
    if not by:
        return None
    known = dates.get(by)
    return Replacement(
        how="superseded" if chunk.superseded_by else "amended",
        document_id=by,
        document_name=known.name if known else chunk.amended_by_name,
        effective_date=known.effective_date if known else None,
    )


def undated_warning(as_of: date, chunks: Iterable[ChunkResult]) -> str | None:
    """A warning naming the undated documents an answer as of ``as_of`` used, or None."""
    undated = sorted({c.document_id for c in chunks if c.effective_date is None})
    if not undated:
        return None
    shown = ", ".join(undated[:10]) + (f" and {len(undated) - 10} more" if len(undated) > 10 else "")
    return (
        f"as_of {as_of.isoformat()}: {len(undated)} document(s) in the context have no effective date and were "
        f"counted as in force from the beginning: {shown}"
    )


def nothing_in_force(as_of: date, documents: Mapping[str, DocumentDate]) -> str | None:
    """The ``no_results`` message when no document of the community was in force on ``as_of``
    (every one is dated, all after it), else None."""
    if not documents or any(d.effective_date is None for d in documents.values()):
        return None
    first = min(d.effective_date for d in documents.values() if d.effective_date is not None)
    if first <= as_of:
        return None
    return (
        f"No document of this community was in force yet on {as_of.isoformat()}: the first took effect on "
        f"{first.isoformat()}. Tell the user nothing governed that date, or ask about a later one."
    )


def dates_line(chunk: ChunkResult) -> str | None:
    """The full ``[SOURCE n]`` header's line on dates (see :func:`dates`)."""
    found = dates(chunk)
    return None if found is None else f"Effective: {found}"


def dates(chunk: ChunkResult) -> str | None:
    """When a passage's document took effect and, if it was replaced, by what and when, as the
    headers say it. None when no date is known (an undated knowledge base's headers stay as they are)."""
    replaced = chunk.replaced
    if chunk.effective_date is None and (replaced is None or replaced.effective_date is None):
        return None
    text = chunk.effective_date.isoformat() if chunk.effective_date else "undated"
    if replaced is not None:
        when = replaced.effective_date.isoformat() if replaced.effective_date else "undated"
        name = replaced.document_name or replaced.document_id
        text += f"; {replaced.how} by {name} [{replaced.document_id}] on {when}"
    return text
