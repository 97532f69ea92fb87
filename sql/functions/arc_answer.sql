-- A question's one round trip: the search (hybrid_search) and everything else the worker reads
-- to answer it, in one call, so that a database in another building costs one network round trip
-- per question (docs/performance.md, "One round trip").
--
-- The search's arguments are hybrid_search's. Besides them:
--   compound_words     the question's words (lower case, in order): the full-text leg also reads
--                      their compounds as the knowledge base spells them (arc_compound_spellings,
--                      added to expansion_text; worker/retrieve/vocabulary.py);
--   calibration_model  the key the community's status calibration is stored under (036);
--   known_version      the community's version a cached result was read at: when it is still the
--                      community's version the search is not run again ("rows" is null);
--   neighbours_of      how many of the best fused candidates come with their neighbours, the passages
--                      context assembly adds where a chunk is cut mid-thought;
--   neighbours_leg_top each leg's best this many come with theirs too (context assembly puts them
--                      in beside the fused order's best, worker/retrieve/context.py);
--   neighbours_depth   1: those candidates' neighbours; 2: the neighbours' own as well (a context
--                      whose passages carry the sentences around them reads past a neighbour it
--                      added);
--   min_version        a read replica's check (worker/store/replicas.py): a database that has not
--                      replayed this knowledge-base version yet returns only {"replayed": its
--                      version, "lag": its replay lag in seconds, null on a primary} and searches
--                      nothing; given, the answer carries both too.
-- It returns one JSON object: the community the question reads (the one named, or the knowledge
-- base's only one; null when the knowledge base holds none, and then nothing else), its version,
-- the stored calibration (arc_status_calibration's row), the confirmations' stamp
-- (arc_confirmation_stamp), the candidates ("rows", hybrid_search's rows), the best candidates'
-- neighbours ("neighbours": {"of": a chunk's id -> its neighbours' ids in document order, itself
-- left out; "chunks": those neighbours, each once, chunk_neighbours' rows}) and the documents
-- that replaced a candidate, each with the day it took effect ("dates", arc_document_dates' rows),
-- and as of a date the same search over every version ("unfiltered", hybrid_search's rows with
-- include_superseded and no date); the last three are null with "rows". A community
-- that is not there, or none named among several, raises hybrid_search's errors (22023).
drop function if exists arc_answer(text, vector, integer, double precision, double precision, text, text[],
  boolean, boolean, text, text, date, text[], text, bigint);
-- the same types with lookup_words, which a parameter's new name cannot replace in place, and
-- without neighbours_depth and min_version:
drop function if exists arc_answer(text, vector, integer, double precision, double precision, text, text[],
  boolean, boolean, text, text, date, text[], text, bigint, integer);

create or replace function arc_answer(
  query_text          text,
  query_embedding     vector default null,
  match_count         integer default 40,
  vector_weight       double precision default 0.7,
  fts_weight          double precision default 0.3,
  fusion              text default 'weighted',
  document_types      text[] default null,
  binding_only        boolean default false,
  include_superseded  boolean default false,
  expansion_text      text default null,
  community           text default null,
  filter_as_of        date default null,
  compound_words      text[] default null,
  calibration_model   text default null,
  known_version       bigint default null,
  neighbours_of       integer default 0,
  neighbours_leg_top  integer default 0,
  neighbours_depth    integer default 1,
  min_version         bigint default null
)
returns jsonb
language plpgsql
set search_path = public, extensions
as $$
declare
  scope    text;
  held     bigint;
  version  bigint;
  found    jsonb := null;
  around   jsonb := null;
  replacing jsonb := null;
  spelled  text[] := '{}';
  replayed jsonb := null;
  dated    boolean;
  searched jsonb;
  unfiltered jsonb := null;
begin
  if min_version is not null then
    replayed := jsonb_build_object(
      'replayed', knowledge_base_version(),
      'lag', extract(epoch from now() - pg_last_xact_replay_timestamp()));
    if (replayed ->> 'replayed')::bigint < min_version then
      return replayed;
    end if;
  end if;
  scope := arc_answer.community;
  if scope is null then
    select min(b.community), count(*) into scope, held from bm25_corpus b where b.n_docs > 0;
    if held = 0 then
      return coalesce(replayed, '{}'::jsonb) || jsonb_build_object('community', null);
    end if;
    if held > 1 then
      scope := null;  -- hybrid_search names the error
    end if;
  end if;
  version := case when scope is null then null else knowledge_base_version(scope) end;
  if scope is null or known_version is null or version is distinct from known_version then
    if scope is not null then
      spelled := arc_compound_spellings(compound_words, scope);
    end if;
    -- The search; as of a date, then the same search over every version ("unfiltered"): a
    -- section an amendment rewrote on either side of the date lends or takes the other's match
    -- (worker/retrieve/in_force.py).
    foreach dated in array case when filter_as_of is null then array[true] else array[true, false] end loop
      select coalesce(jsonb_agg(to_jsonb(h)), '[]'::jsonb) into searched
      from hybrid_search(
        query_text         => arc_answer.query_text,
        query_embedding    => arc_answer.query_embedding,
        match_count        => arc_answer.match_count,
        vector_weight      => arc_answer.vector_weight,
        fts_weight         => arc_answer.fts_weight,
        fusion             => arc_answer.fusion,
        document_types     => arc_answer.document_types,
        binding_only       => arc_answer.binding_only,
        include_superseded => arc_answer.include_superseded or not dated,
        expansion_text     => nullif(concat_ws(' ', nullif(arc_answer.expansion_text, ''),
                                                   nullif(array_to_string(spelled, ' '), '')), ''),
        -- the community resolved above, named: hybrid_search then plans for it as it does for a
        -- caller that names it (its own vector index); null only to raise hybrid_search's error
        community          => coalesce(scope, arc_answer.community),
        filter_as_of       => case when dated then arc_answer.filter_as_of end
      ) h;
      if dated then
        found := searched;
      else
        unfiltered := searched;
      end if;
    end loop;
    with centres as (
      (select (r ->> 'id')::bigint as id
       from jsonb_array_elements(found) r
       order by (r ->> 'fused_score')::double precision desc, (r ->> 'id')::bigint
       limit greatest(neighbours_of, 0))
      union
      select (r ->> 'id')::bigint
      from jsonb_array_elements(found) r
      where (r ->> 'vector_rank')::integer <= neighbours_leg_top or (r ->> 'fts_rank')::integer <= neighbours_leg_top
    ), reached as (  -- the chunks whose neighbours are sent
      select c.id from centres c
      union
      select n.id from centres c, chunk_neighbours(c.id, 1) n where neighbours_depth > 1
    ), pairs as (
      select k.id as of_id, n.id, n.chunk_index, to_jsonb(n) as body
      from reached k
      left join lateral chunk_neighbours(k.id, 1) n on n.id <> k.id
    )
    select jsonb_build_object(
             'of', coalesce((select jsonb_object_agg(g.of_id::text, g.ids)
                             from (select of_id,
                                          coalesce(jsonb_agg(id order by chunk_index) filter (where id is not null),
                                                   '[]'::jsonb) as ids
                                   from pairs group by of_id) g), '{}'::jsonb),
             'chunks', coalesce((select jsonb_agg(d.body)
                                 from (select distinct on (id) body from pairs where id is not null) d),
                                '[]'::jsonb))
      into around;
    -- the documents that superseded or amended a candidate, with the day each took effect
    select coalesce(jsonb_agg(to_jsonb(d)), '[]'::jsonb) into replacing
    from arc_document_dates(scope, (
           select coalesce(array_agg(distinct x.document_id), '{}')
           from jsonb_array_elements(found) r,
                lateral (values (r ->> 'superseded_by'), (r -> 'metadata' ->> 'amended_by')) x(document_id)
           where x.document_id is not null)) d;
  end if;
  return coalesce(replayed, '{}'::jsonb) || jsonb_build_object(
    'community', scope,
    'version', version,
    'calibration', case when calibration_model is null then null
                        else (select to_jsonb(c) from arc_status_calibration(scope, calibration_model) c) end,
    'confirmations', arc_confirmation_stamp(scope),
    'rows', found,
    'unfiltered', unfiltered,
    'neighbours', around,
    'dates', replacing
  );
end
$$;

select arc_service_role_only('function', 'arc_answer(text, vector, integer, double precision, double precision, text, text[], boolean, boolean, text, text, date, text[], text, bigint, integer, integer, integer, bigint)');
