"""The keeper's confirmed answers and the chat's votes: what every door (the webhook, the pages,
the command line) does once it has checked the caller. A confirmation is stored with the
question's embedding (read by ``worker/retrieve/confirmed.py``) and its passage named by document
and text, so that it follows the passage through a re-ingest and turns stale when it changes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..errors import CommunityRequired, NotFound
from ..models import DEFAULT_COMMUNITY, NOT_BOOLEAN, RetrievalRequest
from ..retrieve.preprocess import preprocess
from ..retrieve.status import fitted_cut
from ..store.calibrations import FittedCut
from ..store.confirmations import ConfirmationStore, NewConfirmation, StoredConfirmation, Vote
from .caller import LOCAL, Caller
from .knowledge import KnowledgeService


class ConfirmRequest(BaseModel):
    """``{"community", "query", "chunk_id"}`` or ``{"community", "query", "answer": "none"}``."""

    # exactly one answer: the schema says it too, so that a client validating against it agrees
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "oneOf": [
                {"required": ["chunk_id"], "properties": {"chunk_id": {"type": "integer"}}},
                {"required": ["answer"], "properties": {"answer": {"const": "none"}}},
            ]
        },
    )

    community: str | None = Field(default=None, max_length=200)
    # some text, and no NUL (which no Postgres text holds)
    query: str = Field(min_length=1, max_length=2000, pattern=r"^[^\x00]*[^\x00\s][^\x00]*$")
    chunk_id: Annotated[int, Field(ge=1), NOT_BOOLEAN] | None = Field(
        default=None, description="The id of the chunk that answers it (an answer's chunks[].id)."
    )
    answer: Literal["none"] | None = Field(default=None, description='"none": the documents do not address it.')

    @model_validator(mode="after")
    def one_answer(self) -> ConfirmRequest:
        if not self.query.strip():
            raise ValueError("query: must not be blank")
        if (self.chunk_id is None) == (self.answer is None):
            raise ValueError('give either chunk_id (the passage that answers it) or answer: "none"')
        return self


class FeedbackRequest(BaseModel):
    """A vote from the chat on an answer the worker gave, named by its ``X-Request-ID``."""

    model_config = ConfigDict(extra="forbid")

    request_id: str = Field(min_length=1, max_length=100, pattern=r"^[^\x00-\x1f\x7f]+$")  # as X-Request-ID is kept
    helpful: bool
    source: Annotated[int, Field(ge=1, le=1000), NOT_BOOLEAN] | None = Field(
        default=None, description="The [SOURCE n] the vote is about, if one."
    )


class Candidate(BaseModel):
    """Today's best passage for a stale confirmation's question, for the keeper to confirm again."""

    chunk_id: int
    document_id: str
    section_path: str


class Confirmation(BaseModel):
    id: int
    community: str
    query: str
    answer: Literal["passage", "none"]
    chunk_id: int | None = Field(
        default=None, description="The chunk holding the confirmed passage today (null: none or stale)."
    )
    document_id: str | None = None
    section_path: str | None = None
    state: Literal["confirmed", "stale"]
    reason: str | None = Field(default=None, description="Why a stale confirmation is stale.")
    created_at: datetime
    candidate: Candidate | None = None

    @classmethod
    def of(cls, stored: StoredConfirmation, candidate: Candidate | None = None) -> Confirmation:
        return cls(
            id=stored.id,
            community=stored.community,
            query=stored.query,
            answer=stored.answer,
            chunk_id=stored.chunk_id,
            document_id=stored.document_id,
            section_path=stored.section_path,
            state=stored.state,
            reason=stored.reason,
            created_at=stored.created_at,
            candidate=candidate,
        )


class ConfirmationList(BaseModel):
    community: str | None
    confirmations: list[Confirmation]


class ConfirmationDeleted(BaseModel):
    deleted: int
    community: str


class Recorded(BaseModel):
    id: int
    request_id: str
    helpful: bool
    source: int | None
    community: str | None


@dataclass(frozen=True)
class SuccessCut:
    """A community's success cut as the keeper sees it: the configured one, the valid confirmations
    a fit would rest on, and the fit stored with the calibration (None: too few, or not yet fitted)."""

    configured_at: float
    answerable: int
    unanswerable: int
    fitted: FittedCut | None
    needs_answerable: int = fitted_cut.MIN_ANSWERABLE
    needs_unanswerable: int = fitted_cut.MIN_NONE


class ConfirmationService:
    def __init__(self, knowledge: KnowledgeService):
        self.knowledge = knowledge
        self.store = ConfirmationStore(knowledge.runtime.db)  # the default database's
        self._stores = {knowledge.runtime.db: self.store}

    def store_for(self, community: str) -> ConfirmationStore:
        """The confirmations of the database that holds ``community``."""
        db = self.knowledge.runtime.database(community)
        return self._stores.setdefault(db, ConfirmationStore(db))

    def _every_store(self) -> list[ConfirmationStore]:
        return [self._stores.setdefault(db, ConfirmationStore(db)) for db in self.knowledge.runtime.databases.all()]

    def confirm(self, request: ConfirmRequest, caller: Caller) -> Confirmation:
        """Store the keeper's answer to a question of the request's community (one ``caller`` may
        write to); the confirmation as it stands."""
        name = self.knowledge.community(caller.writes(request.community), caller=caller)
        chunk = None
        if request.chunk_id is not None:
            chunk = self.store_for(name).chunk(name, request.chunk_id)
            if chunk is None:
                raise NotFound(f"no chunk of community {name!r} has id {request.chunk_id}", "chunk_id")
        embedder = self.knowledge.runtime.embedder
        vector = embedder.embed_query(preprocess(request.query).normalized)
        new = NewConfirmation(
            community=name,
            query=request.query.strip(),
            answer="passage" if chunk else "none",
            embedding=vector,
            embedding_model=embedder.model,
            chunk=chunk,
        )
        confirmation_id = self.store_for(name).add(new)
        self._changed(name)
        return next(c for c in self.list(name, caller, candidates=False) if c.id == confirmation_id)

    def list(self, community: str | None, caller: Caller, *, candidates: bool = True) -> list[Confirmation]:
        """A community's confirmations (one ``caller`` reaches); a stale one with today's best
        passage for its question (``candidates``)."""
        name = self.knowledge.community(community, caller=caller)
        return [
            Confirmation.of(s, self._candidate(s, caller) if candidates and s.state == "stale" else None)
            for s in self.store_for(name).read(name)
        ]

    def success_cut(self, listed: Sequence[Confirmation], community: str | None, caller: Caller) -> SuccessCut:
        """The success cut ``community``'s status decides on and what it rests on (one ``caller``
        reaches); ``listed``: the community's confirmations, as :meth:`list` gave them."""
        name = self.knowledge.community(community, caller=caller)
        calibrator = self.knowledge.shard(name).retriever.calibrator
        valid = [c for c in listed if c.state == "confirmed"]
        answerable = sum(s.answer == "passage" for s in valid)
        stored = calibrator.store.read(name, calibrator.key).stored if calibrator.enabled else None
        return SuccessCut(
            configured_at=calibrator.cuts.success_at,
            answerable=answerable,
            unanswerable=len(valid) - answerable,
            fitted=stored.fitted if stored is not None else None,
        )

    def delete(self, confirmation_id: int, caller: Caller) -> str:
        """Remove one of a community ``caller`` may write to. Another community's confirmation is
        as unknown as a missing one."""
        caller.may_write()
        held = [
            (store, community)
            for store in self._every_store()
            if (community := store.community_of(confirmation_id)) is not None and _reaches(caller, community)
        ]
        if not held:
            raise NotFound(f"no confirmation {confirmation_id}", "id")
        if len(held) > 1:  # each database numbers its own: the id alone does not say which
            raise CommunityRequired(f"community: confirmation {confirmation_id} is in several databases' communities")
        store, community = held[0]
        store.delete(confirmation_id, community)
        self._changed(community)
        return community

    def _changed(self, community: str) -> None:
        """After a confirmation of ``community`` was written: the matcher reads them again, and the
        success cut they fit is fitted again in the background."""
        retriever = self.knowledge.shard(community).retriever
        retriever.confirmations.forget(community)
        retriever.calibrator.refit(community)

    def vote(self, request: FeedbackRequest, caller: Caller) -> Recorded:
        """Record a vote on a logged answer of a community ``caller`` reaches (never a
        confirmation by itself)."""
        store, logged, community = self._logged(request.request_id)
        if not logged and self.knowledge.flush_query_logs():  # an answer given moments ago: its row is queued
            store, logged, community = self._logged(request.request_id)
        if not logged or not _reaches(caller, community):
            raise NotFound("no answer was logged under this request id", "request_id")
        vote = Vote(request.request_id, community, request.helpful, request.source)
        return Recorded(
            id=store.vote(vote),
            request_id=vote.request_id,
            helpful=vote.helpful,
            source=vote.source,
            community=community,
        )

    def _logged(self, request_id: str) -> tuple[ConfirmationStore, bool, str | None]:
        """The database whose query log holds an answer under ``request_id`` (its store), whether
        one does, and its community."""
        for store in self._every_store():
            logged, community = store.logged_request(request_id)
            if logged:
                return store, True, community
        return self.store, False, None

    def _candidate(self, stale: StoredConfirmation, caller: Caller) -> Candidate | None:
        request = RetrievalRequest(query=stale.query, community=stale.community)
        answer = self.knowledge.ask(request, caller=caller, record=False)
        if not answer.chunks:
            return None
        best = answer.chunks[0]
        return Candidate(chunk_id=best.id, document_id=best.document_id, section_path=best.section_path)


def _reaches(caller: Caller, community: str | None) -> bool:
    """Whether ``caller`` reaches ``community`` (a row of no community belongs to default)."""
    return caller.communities is None or (community or DEFAULT_COMMUNITY) in caller.communities


# -- the keeper's questions as a regression set and as a dataset file ------------------------

EVIDENCE_CHARS = 160  # an exported passage's evidence phrase: its opening words, up to this length


class Replayed(BaseModel):
    """One confirmed question asked again as if unconfirmed."""

    id: int
    query: str
    answer: Literal["passage", "none"]
    status: str
    evidence: bool | None = Field(default=None, description="The confirmed passage is in the context (passages only).")
    source_1: bool | None = Field(default=None, description="The confirmed passage is [SOURCE 1] (passages only).")
    status_right: bool


class ReplayReport(BaseModel):
    community: str
    asked: list[Replayed]
    stale: int

    def share(self, name: str) -> float | None:
        values = [getattr(r, name) for r in self.asked if getattr(r, name) is not None]
        return round(sum(values) / len(values), 3) if values else None


def replay(service: ConfirmationService, community: str | None) -> ReplayReport:
    """Every valid confirmation of ``community`` asked through the current configuration with the
    confirmations set aside: what the settings, model and reranker find on their own."""
    from ..retrieve.confirmed import Confirmations

    name = service.knowledge.community(community, caller=LOCAL)
    stored = service.store_for(name).read(name)
    retriever = service.knowledge.shard(name).retriever
    kept = retriever.confirmations
    retriever.confirmations = Confirmations(load=None, stamp=str, model=kept.model)
    asked: list[Replayed] = []
    try:
        for s in stored:
            if s.state != "confirmed":
                continue
            answer = service.knowledge.ask(RetrievalRequest(query=s.query, community=name), caller=LOCAL, record=False)
            if s.answer == "none":
                asked.append(
                    Replayed(
                        id=s.id,
                        query=s.query,
                        answer="none",
                        status=answer.status,
                        status_right=answer.status != "success",
                    )
                )
                continue
            sources = {c.id: c.source for c in answer.chunks if c.source is not None}
            asked.append(
                Replayed(
                    id=s.id,
                    query=s.query,
                    answer="passage",
                    status=answer.status,
                    evidence=s.chunk_id in sources,
                    source_1=sources.get(s.chunk_id or -1) == 1,
                    status_right=answer.status == "success",
                )
            )
    finally:
        retriever.confirmations = kept
    return ReplayReport(community=name, asked=asked, stale=sum(1 for s in stored if s.state == "stale"))


def export_rows(service: ConfirmationService, community: str | None) -> list[dict[str, object]]:
    """The community's valid confirmations as the answer dataset's questions.jsonl rows."""
    name = service.knowledge.community(community, caller=LOCAL)
    rows: list[dict[str, object]] = []
    for s in service.store_for(name).read(name):
        if s.state != "confirmed":
            continue
        row: dict[str, object] = {"id": f"confirmed-{s.id}", "community": name, "question": s.query}
        if s.answer == "none":
            row["kind"] = "unanswerable"
        else:
            chunk = service.store_for(name).chunk(name, s.chunk_id or -1)
            if chunk is None:
                continue
            row.update(kind="answerable", gold_document=chunk.document_id, evidence=[_opening(chunk.content)])
        row["notes"] = "[confirmed] by the keeper"
        rows.append(row)
    return rows


class DatasetRow(BaseModel):
    """A question of the answer dataset's questions.jsonl, as far as a confirmation reads it."""

    id: str
    question: str
    kind: str
    community: str | None = None
    gold_document: str | None = None
    evidence: list[str] = Field(default_factory=list)


def import_rows(
    service: ConfirmationService, rows: list[DatasetRow], community: str | None, normalise: Callable[[str], str]
) -> tuple[int, list[str]]:
    """Confirm each row: an answerable one by the chunk of its community (of its gold document,
    when named) holding one of its evidence phrases (both ``normalise``-d), another kind as
    "none". Returns how many were confirmed and a note for each that was not."""
    done, notes = 0, []
    for row in rows:
        named = community or row.community or None
        query = row.question
        if row.kind == "answerable":
            phrases = [normalise(e) for e in row.evidence]
            name = service.knowledge.community(named, caller=LOCAL)
            chunk_id = next(
                (
                    chunk_id
                    for chunk_id, document_id, content in service.store_for(name).chunks(name)
                    if (row.gold_document in (None, document_id)) and any(p in normalise(content) for p in phrases)
                ),
                None,
            )
            if chunk_id is None:
                notes.append(f"{row.id}: no chunk holds its evidence; not confirmed")
                continue
            request = ConfirmRequest(community=named, query=query, chunk_id=chunk_id)
        else:
            request = ConfirmRequest(community=named, query=query, answer="none")
        service.confirm(request, LOCAL)
        done += 1
    return done, notes


def _opening(content: str) -> str:
    text = " ".join(content.split())
    if len(text) <= EVIDENCE_CHARS:
        return text
    return text[:EVIDENCE_CHARS].rsplit(" ", 1)[0]
