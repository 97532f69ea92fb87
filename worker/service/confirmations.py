"""The keeper's confirmed answers and the chat's votes: what every door (the webhook, the pages,
the command line) does once it has checked the caller. A confirmation is stored with the
question's embedding (read by ``worker/retrieve/confirmed.py``) and its passage named by document
and text, so that it follows the passage through a re-ingest and turns stale when it changes."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..errors import InvalidInput, NotFound
from ..models import RetrievalRequest
from ..retrieve.preprocess import preprocess
from ..store.confirmations import ConfirmationStore, NewConfirmation, StoredConfirmation, Vote
from .knowledge import KnowledgeService


class ConfirmRequest(BaseModel):
    """``{"community", "query", "chunk_id"}`` or ``{"community", "query", "answer": "none"}``."""

    model_config = ConfigDict(extra="forbid")

    community: str | None = Field(None, max_length=200)
    query: str = Field(min_length=1, max_length=2000)
    chunk_id: int | None = Field(
        None, ge=1, description="The id of the chunk that answers it (an answer's chunks[].id)."
    )
    answer: Literal["none"] | None = Field(None, description='"none": the documents do not address it.')

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

    request_id: str = Field(min_length=1, max_length=100)
    helpful: bool
    source: int | None = Field(None, ge=1, le=1000, description="The [SOURCE n] the vote is about, if one.")


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
        None, description="The chunk holding the confirmed passage today (null: none or stale)."
    )
    document_id: str | None = None
    section_path: str | None = None
    state: Literal["confirmed", "stale"]
    reason: str | None = Field(None, description="Why a stale confirmation is stale.")
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


class Recorded(BaseModel):
    id: int
    request_id: str
    helpful: bool
    source: int | None
    community: str | None


class ConfirmationService:
    def __init__(self, knowledge: KnowledgeService):
        self.knowledge = knowledge
        self.store = ConfirmationStore(knowledge.runtime.db)

    def confirm(self, request: ConfirmRequest, community: str | None) -> Confirmation:
        """Store the keeper's answer to a question of ``community`` (the door checked the caller
        may write there); the confirmation as it stands."""
        name = self.knowledge.community(community)
        chunk = None
        if request.chunk_id is not None:
            chunk = self.store.chunk(name, request.chunk_id)
            if chunk is None:
                raise InvalidInput(f"no chunk of community {name!r} has id {request.chunk_id}", "chunk_id")
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
        confirmation_id = self.store.add(new)
        self.knowledge.retriever.confirmations.forget(name)
        return next(c for c in self.list(name, candidates=False) if c.id == confirmation_id)

    def list(self, community: str | None, *, candidates: bool = True) -> list[Confirmation]:
        """A community's confirmations; a stale one with today's best passage for its question
        (``candidates``)."""
        name = self.knowledge.community(community)
        return [
            Confirmation.of(s, self._candidate(s) if candidates and s.state == "stale" else None)
            for s in self.store.list(name)
        ]

    def delete(self, confirmation_id: int, allowed: tuple[str, ...] | None) -> str:
        """Remove one; the caller's token reaches ``allowed`` (None: every community). Another
        community's confirmation is as unknown as a missing one."""
        community = self.store.community_of(confirmation_id)
        if community is None or (allowed is not None and community not in allowed):
            raise NotFound(f"no confirmation {confirmation_id}", "id")
        self.store.delete(confirmation_id, community)
        self.knowledge.retriever.confirmations.forget(community)
        return community

    def vote(self, request: FeedbackRequest, allowed: tuple[str, ...] | None) -> Recorded:
        """Record a vote on a logged answer (never a confirmation by itself)."""
        logged, community = self.store.logged_request(request.request_id)
        if not logged or (allowed is not None and community not in allowed):
            raise NotFound("no answer was logged under this request id", "request_id")
        vote = Vote(request.request_id, community, request.helpful, request.source)
        return Recorded(
            id=self.store.vote(vote),
            request_id=vote.request_id,
            helpful=vote.helpful,
            source=vote.source,
            community=community,
        )

    def _candidate(self, stale: StoredConfirmation) -> Candidate | None:
        answer = self.knowledge.ask(RetrievalRequest(query=stale.query, community=stale.community), record=False)
        if not answer.chunks:
            return None
        best = answer.chunks[0]
        return Candidate(chunk_id=best.id, document_id=best.document_id, section_path=best.section_path)
