"""What a token limited to communities reaches, and how ``ARC_COMMUNITY_TOKENS`` spells it.

``"heronwood,timbers:SECRET1;write@wyndham-forest:SECRET2"``: each entry's token reads (questions,
listings) through every door for its communities only; only one marked ``write@`` may also ingest
and delete there.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

COMMUNITY_SCOPES = ("read", "write")


class CommunityGrant(BaseModel):
    """What a token of ARC_COMMUNITY_TOKENS reaches: its communities, to read; to ingest and
    delete there too only when its entry says ``write@``."""

    model_config = ConfigDict(frozen=True)

    communities: tuple[str, ...]
    write: bool = False


def parse_grants(text: str, *, min_token_length: int) -> dict[str, CommunityGrant]:
    """``[write@]COMMUNITY[,COMMUNITY...]:TOKEN;...`` as each token's grant; ``ValueError`` names
    what is wrong with an entry (a token shorter than ``min_token_length`` is refused: it would be
    weaker than the tokens it stands beside)."""
    scoped: dict[str, CommunityGrant] = {}
    for entry in filter(None, (e.strip() for e in text.split(";"))):
        names, sep, token = entry.partition(":")
        scope, marked, listed = names.rpartition("@")
        scope = scope.strip().lower() if marked else "read"
        communities = tuple(n.strip() for n in listed.split(",") if n.strip())
        if not sep or not token or not communities or scope not in COMMUNITY_SCOPES:
            raise ValueError("entries are [write@]COMMUNITY[,COMMUNITY...]:TOKEN, separated by ;")
        if len(token) < min_token_length:
            raise ValueError(f"a community token needs at least {min_token_length} characters")
        scoped[token] = CommunityGrant(communities=communities, write=scope == "write")
    return scoped
