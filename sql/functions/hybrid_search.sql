-- hybrid_search, the one function every retrieval goes through (direct Postgres and Supabase RPC
-- alike).
--
-- Two legs, each filtered the same way and each bounded to match_count rows:
--   vector leg  : HNSW cosine search; vector_score = cosine similarity.
--   full-text leg: chunks holding the question's words (impact-ordered postings, 012), ranked by
--                  BM25 (003_bm25.sql); fts_score = BM25 divided by the score of an average-length
--                  chunk holding every query lexeme once (lexemes absent from the corpus
--                  included), capped at 1, so it is comparable across queries.
-- Fused by FULL OUTER JOIN:
--   'weighted' : weighted mean of each leg's score min-max normalised over the candidate list
--                (a leg that missed the chunk counts 0);
--   'rrf'      : sum of weight / (rrf_k + rank) over the legs a chunk appears in.
-- Without an embedding (the embedder failed) only the full-text leg runs and fts_weight is 1.
-- expansion_text: extra words for the full-text leg only (synonyms), weighted expansion_weight.
--
-- One community (030): `community` null means the knowledge base's one community; with several it
-- is an error (22023) naming the parameter, and so is a community that holds no chunks. Both legs
-- read that community alone, inside the SQL: the vector leg on the community's own HNSW index when
-- it has one (on its own vector table, at half precision: arc_community_vector_index), exactly
-- over its rows when it is a small community among several (094) or the knowledge base has no
-- global HNSW index (one of several drops it, arc_community_vector_indexes), else filtering the
-- global HNSW scan on it (iterative scans keep filling match_count); the full-text leg reads that
-- community's postings and scores with its statistics (bm25_query_terms(text, community)).
-- Nothing of another community is ever a candidate.
--
-- filter_as_of: only chunks in force that day are candidates (arc_in_force, docs/as-of.md), in
-- both legs; the caller includes superseded documents then, since one superseded later was in
-- force. Null: no such condition.
--
-- Bounded work at any size: the full-text leg reads each question word's best chunks from the
-- impact-ordered postings (012_bm25_postings.sql), at most fts_scan_limit index entries shared
-- among the words (a short list whole, the rest split evenly among the longer ones), and adds
-- up what it read of each chunk (its partial score). Chunks are then scored exactly from their
-- stored weights, best partial score first, match_count and then all the others at once, at
-- most fts_rescore (400) of them; filters apply as they are scored. Scoring stops early once
-- no chunk left can reach the match_count-th score: each has an upper bound, what was read of
-- it plus, for every word it was not read in, the last weight read there (0 when the word's
-- list is complete and was read whole). On a governing-documents corpus every list is complete,
-- the bounds are the scores, and the leg scores match_count chunks. On large corpora it seldom
-- stops early, so fts_rescore trades recall against time (docs/performance.md); raise it for
-- recall on large corpora that can afford it.
-- The function sets its own hnsw.ef_search and, on pgvector >= 0.8, iterative index scans, so a
-- filtered vector leg still fills match_count rows.
-- Earlier signatures (0.1.0; before the postings, with the rare-word selection's two parameters;
-- before communities): dropped so that named calls stay unambiguous.
drop function if exists hybrid_search(text, vector, integer, double precision, double precision, text, integer,
                                      text[], boolean, boolean, integer, double precision, integer, integer);
drop function if exists hybrid_search(text, vector, integer, double precision, double precision, text, integer,
                                      text[], boolean, boolean, integer, double precision, integer, integer,
                                      text, double precision);
drop function if exists hybrid_search(text, vector, integer, double precision, double precision, text, integer,
                                      text[], boolean, boolean, integer, integer, text, double precision, integer);
drop function if exists hybrid_search(text, vector, integer, double precision, double precision, text, integer,
                                      text[], boolean, boolean, integer, integer, text, double precision, integer,
                                      text);
create or replace function hybrid_search(
  query_text          text,
  query_embedding     vector default null,
  match_count         integer default 40,
  vector_weight       double precision default 0.7,
  fts_weight          double precision default 0.3,
  fusion              text default 'weighted',
  rrf_k               integer default 60,
  document_types      text[] default null,
  binding_only        boolean default false,
  include_superseded  boolean default false,
  ef_search           integer default null,
  fts_scan_limit      integer default 5000,
  expansion_text      text default null,
  expansion_weight    double precision default 0.5,
  fts_rescore         integer default null,
  community           text default null,
  filter_as_of        date default null
)
returns table (
  id bigint, document_id text, document_name text, document_type text, section_path text,
  page_number integer, chunk_index integer, is_binding boolean, superseded_by text,
  content text, token_count integer, metadata jsonb,
  vector_score double precision, fts_score double precision, bm25_score double precision,
  fused_score double precision, vector_rank integer, fts_rank integer
)
language plpgsql
set search_path = public, extensions
set statement_timeout = '5s'
-- Every read below goes through an index (HNSW, the postings' impact order, primary keys); the
-- cost model, which does not see that the wide columns are TOASTed, would sometimes scan instead.
set enable_seqscan = off
-- Its two statements keep one plan each for the session: left to choose, Postgres plans them
-- afresh on every call (custom plans), which costs more than the generic plans save.
set plan_cache_mode = force_generic_plan
as $$
#variable_conflict use_column
declare
  qvec        sparsevec;
  idf_mass    double precision;
  read_words  text[];
  read_weight double precision[];
  read_count  integer[];
  read_floor  real[];
  rescore     integer;
  unread_bound    double precision;
  candidate       bigint[];
  candidate_above double precision[];
  next_at         integer := 1;
  batch_ids       bigint[];
  batch_scores    double precision[];
  scored_ids      bigint[] := '{}';
  scored          double precision[] := '{}';
  kth_score       double precision;
  rescore_step    integer := match_count;
  scope       text;
  holding     bigint;
  scope_size  bigint;
  leg_ids     bigint[];
  leg_dist    double precision[];
  own_leg     regprocedure;
  leg_name    text;
  sorting     text;
  vw          double precision := coalesce(vector_weight, 0.7);
  fw          double precision := coalesce(fts_weight, 0.3);
begin
  if match_count is null or match_count < 1 or match_count > 1000 then
    raise exception 'match_count must be between 1 and 1000' using errcode = '22023';
  end if;
  if fts_scan_limit is null or fts_scan_limit < 1 then
    raise exception 'fts_scan_limit must be at least 1' using errcode = '22023';
  end if;
  if fts_rescore is not null and fts_rescore < 1 then
    raise exception 'fts_rescore must be at least 1' using errcode = '22023';
  end if;
  if fusion is null or fusion not in ('weighted', 'rrf') then
    raise exception 'fusion must be weighted or rrf' using errcode = '22023';
  end if;
  -- The community every read below is limited to.
  if hybrid_search.community is not null then
    select b.community, b.n_docs into scope, scope_size
      from bm25_corpus b where b.community = hybrid_search.community and b.n_docs > 0;
    if scope is null then
      raise exception 'community %: no such community in this knowledge base', hybrid_search.community
        using errcode = '22023';
    end if;
  else
    select min(b.community), count(*) into scope, holding from bm25_corpus b where b.n_docs > 0;
    if holding > 1 then
      raise exception 'community is required: this knowledge base holds % communities', holding
        using errcode = '22023';
    end if;
    if scope is null then
      return;  -- an empty knowledge base
    end if;
  end if;

  if query_embedding is null then
    vw := 0;
    fw := 1;
  end if;

  perform set_config('hnsw.ef_search',
                     least(greatest(coalesce(ef_search, 3 * match_count), match_count, 100), 1000)::text, true);
  begin
    perform set_config('hnsw.iterative_scan', 'relaxed_order', true);
  exception when others then
    null;  -- pgvector < 0.8: no iterative scans; the larger ef_search above still helps
  end;

  -- A community with an HNSW index of its own is searched there, on its own vector table
  -- (arc_community_vector_index), with sorting off, without which a filtered search would rather
  -- read the table's rows of that type and sort them. That statement is the community's vector leg
  -- function, whose plan is kept for the session; without it (an index made by hand) the same
  -- statement is planned here on every call. Each way of reading the leg leaves its ids and
  -- distances in leg_ids / leg_dist for the fusion.
  if query_embedding is not null then
    leg_name := arc_community_vector_leg_name(scope);
    select to_regprocedure(format('%I(vector, text[], boolean, boolean, integer)', leg_name))
      into own_leg
      from pg_index i
     where i.indexrelid = to_regclass(quote_ident(arc_community_vector_index_name(scope))) and i.indisvalid;
    if found then
      if own_leg is not null then
        execute format('select array_agg(v.id order by v.distance), array_agg(v.distance order by v.distance)'
                       '  from %I($1, $2, $3, $4, $5) v', leg_name)
          into leg_ids, leg_dist
          using query_embedding, document_types, binding_only, include_superseded, match_count;
      else
        sorting := current_setting('enable_sort');
        perform set_config('enable_sort', 'off', true);
        execute format('select array_agg(v.id order by v.distance), array_agg(v.distance order by v.distance)'
                       '  from (%s) v', arc_community_vector_leg_statement(scope))
          into leg_ids, leg_dist
          using query_embedding, document_types, binding_only, include_superseded, match_count;
        perform set_config('enable_sort', sorting, true);
      end if;
      leg_ids := coalesce(leg_ids, '{}');
    elsif (scope_size < arc_community_index_min_chunks()
           -- another community holds chunks: two range probes of the primary key (with sequential
           -- scans off here, "<>" would cost a disabled scan, and PostgreSQL 15 would JIT-compile it)
           and (exists (select 1 from bm25_corpus b where b.community < scope and b.n_docs > 0)
                or exists (select 1 from bm25_corpus b where b.community > scope and b.n_docs > 0)))
          or to_regclass('knowledge_chunks_embedding_hnsw') is null then
      -- A small community among several has no index of its own (094): its rows are read exactly
      -- through the btree indexes that lead with the community. The distance plus 0 is not an
      -- order any HNSW index gives, so the global one (filtered, pgvector's weak spot) is not used.
      -- So is a community when the knowledge base has no global index (a knowledge base of several
      -- drops it, arc_community_vector_indexes): one whose own index failed, or the one left.
      select array_agg(v.id order by v.distance), array_agg(v.distance order by v.distance)
        into leg_ids, leg_dist
        from (select c.id, c.embedding <=> query_embedding as distance
                from knowledge_chunks c
               where c.community = scope
                 and (document_types is null or (c.document_type || '') = any (document_types))
                 and (not binding_only or c.is_binding)
                 and (include_superseded or c.superseded_by is null)
                 and (filter_as_of is null or arc_in_force(c.id, filter_as_of))
               order by (c.embedding <=> query_embedding) + 0
               limit match_count) v;
      leg_ids := coalesce(leg_ids, '{}');
    else
      -- Through the global index, the community inside the HNSW scan (iterative scans keep filling
      -- match_count). A statement of its own, planned only when it runs: without the index its plan
      -- would cost a scan of the whole table, which PostgreSQL 15 would JIT-compile on every call.
      select array_agg(v.id order by v.distance), array_agg(v.distance order by v.distance)
        into leg_ids, leg_dist
        from (select c.id, c.embedding <=> query_embedding as distance
                from knowledge_chunks c
                -- expressions, not the bare columns: on large corpora the planner otherwise reads
                -- every chunk of the type (or of the community) through the btree and sorts them
                -- instead of filtering during the HNSW scan
               where (document_types is null or (c.document_type || '') = any (document_types))
                 and (c.community || '') = scope
                 and (not binding_only or c.is_binding)
                 and (include_superseded or c.superseded_by is null)
                 and (filter_as_of is null or arc_in_force(c.id, filter_as_of))
               order by c.embedding <=> query_embedding
               limit match_count) v;
      leg_ids := coalesce(leg_ids, '{}');
    end if;
  end if;

  rescore := least(coalesce(fts_rescore, 400), fts_scan_limit);

  -- One pass over the question's lexemes gives the BM25 query vector and what the leg reads.
  with all_terms as (
    select * from bm25_query_terms(query_text, scope)
  ), terms as (
    select t.lexeme, t.idx, t.df, t.idf * t.qtf as w from all_terms t where t.df > 0
    union all
    -- the documents' words for the question's (worker/retrieve/vocabulary.py): they find and score
    -- chunks at expansion_weight, and do not count in the normaliser below
    select e.lexeme, e.idx, e.df, e.idf * e.qtf * coalesce(expansion_weight, 0.5)
    from bm25_query_terms(expansion_text, scope) e
    where e.df > 0 and e.lexeme not in (select lexeme from all_terms)
  ), by_index as (
    select idx, sum(w) as w from terms group by idx
  ), by_length as (
    -- How many postings each word reads: fts_scan_limit shared out water-filling, shortest list
    -- first, so that a short list is read whole and what it leaves goes to the longer ones.
    select t.lexeme, t.w, l.kept as listed, l.floor,
           row_number() over (order by l.kept, t.lexeme) as place, count(*) over () as words,
           coalesce(sum(l.kept) over (order by l.kept, t.lexeme rows between unbounded preceding and 1 preceding),
                    0) as before
    -- one index lookup per word (limit 1 keeps the planner from turning it into a join, for
    -- which the generic plan reads all of bm25_terms)
    from terms t cross join lateral (
      select b.kept, b.floor from bm25_terms b where b.community = scope and b.lexeme = t.lexeme limit 1
    ) l
  ), level as (
    select coalesce((array_agg((fts_scan_limit - before)::double precision / (words - place + 1) order by place)
                       filter (where listed > (fts_scan_limit - before)::double precision / (words - place + 1)))[1],
                    'infinity') as share
    from by_length
  )
  select (select ('{' || string_agg(idx || ':' || w, ',' order by idx) || '}/999999999')::sparsevec
            from by_index),
         -- the normaliser counts every query lexeme, found in the corpus or not: a question
         -- whose one matching word is "2019" is not a full match (counting only the words found,
         -- "who won the world series in 2019" would score fts 1.0 against governing documents)
         (select sum(idf * qtf) from all_terms),
         r.words, r.weights, r.counts, r.floors
    into qvec, idf_mass, read_words, read_weight, read_count, read_floor
    from (select array_agg(lexeme order by place) as words,
                 array_agg(w order by place) as weights,
                 array_agg(greatest(least(listed::double precision, floor(share)), 1)::integer order by place) as counts,
                 -- a list read whole bounds the chunks it does not hold by its floor (0: it holds them all)
                 array_agg(case when listed <= share then coalesce(floor, 0) end order by place) as floors
          from by_length, level) r;

  -- The candidates: every chunk read, with the most its BM25 score can be. A chunk missing from
  -- a word's list holds that word at most as strongly as the last posting read there (or below
  -- the list's floor, 012, when the whole list was read; not at all when that list is complete),
  -- so its bound is the sum of what was read plus those ceilings for the words it was not read in.
  with words as (
    select q.lexeme, q.w, q.n,
           -- the n-th weight of the list, where its reading stops (one index probe)
           q.w * coalesce(q.list_floor, (select b.weight from bm25_postings b
                                         where b.community = scope and b.lexeme = q.lexeme
                                          order by b.weight desc offset q.n - 1 limit 1), 0) as ceiling
    from unnest(read_words, read_weight, read_count, read_floor) as q(lexeme, w, n, list_floor)
  ), reads as (
    select q.w, q.ceiling, p.chunk_id, p.weight
    from words q
    cross join lateral (
      select b.chunk_id, b.weight from bm25_postings b
      where b.community = scope and b.lexeme = q.lexeme
      order by b.weight desc
      limit q.n
    ) p
  ), bounded as (
    -- Scored in the order of what was read of them (partial scores), which finds the best
    -- chunks sooner than their bounds do when not all can be scored.
    select r.chunk_id, sum(r.w * r.weight) as partial, sum(r.w * r.weight - r.ceiling) as above
    from reads r
    group by r.chunk_id
    order by partial desc, r.chunk_id
    limit rescore
  )
  -- both arrays in the same order (Postgres 16 and later sort once for the two)
  select coalesce((select sum(ceiling) from words), 0),
         array_agg(chunk_id order by partial desc, chunk_id),
         array_agg(above order by partial desc, chunk_id)
  from bounded
    into unread_bound, candidate, candidate_above;

  -- Score them exactly (their stored weights) in that order until no bound left can reach the
  -- match_count-th score: the leg is then exact over every chunk read, and over the whole
  -- corpus when that score also beats unread_bound. Filters apply here, so a filtered leg stops
  -- at its own match_count-th score.
  while next_at <= coalesce(cardinality(candidate), 0) loop
    -- the highest bound among those not yet scored, taken only when there is a score to beat
    -- (a window over the candidates for every row cost more than these few looks)
    exit when kth_score is not null
              and unread_bound + (select max(a) from unnest(candidate_above[next_at:]) a) < kth_score;
    select coalesce(array_agg(c.id), '{}'), coalesce(array_agg(-(c.bm25 <#> qvec)), '{}')
      into batch_ids, batch_scores
      from knowledge_chunks c
     where c.id = any (candidate[next_at:next_at + rescore_step - 1])
       and c.community = scope
       and (document_types is null or c.document_type = any (document_types))
       and (not binding_only or c.is_binding)
       and (include_superseded or c.superseded_by is null)
       and (filter_as_of is null or arc_in_force(c.id, filter_as_of));
    scored_ids := scored_ids || batch_ids;
    scored := scored || batch_scores;
    if cardinality(scored) >= match_count then
      select s into kth_score from unnest(scored) s order by s desc offset match_count - 1 limit 1;
    end if;
    next_at := next_at + rescore_step;
    -- a leg that did not stop after its first match_count seldom stops later: one read for the
    -- rest, not more statements
    rescore_step := rescore;
  end loop;
  -- what the pruning saved (set client_min_messages = debug to see it)
  raise debug 'hybrid_search fts leg: % candidates, % scored, % passed the filters', coalesce(cardinality(candidate), 0),
    least(next_at - 1, coalesce(cardinality(candidate), 0)), cardinality(scored);

  return query
  with vector_leg as (
    select v.id, 1 - v.distance as score, (row_number() over (order by v.distance))::integer as rank
    from unnest(leg_ids, leg_dist) as v(id, distance)
    -- the community's own index (033) is read without it: its list is filtered here (the other
    -- reads filtered already: the check again is cheap on match_count rows)
    where filter_as_of is null or arc_in_force(v.id, filter_as_of)
  ), fts_leg as (
    select f.id, f.score, (row_number() over (order by f.score desc, f.id))::integer as rank
    from unnest(scored_ids, scored) as f(id, score)
    order by f.score desc, f.id
    limit match_count
  ), joined as (
    select coalesce(v.id, f.id) as id,
           v.score as vector_score,
           case when f.score is not null then least(f.score / nullif(idf_mass, 0), 1.0) end as fts_score,
           f.score as bm25_score,
           v.rank as vector_rank,
           f.rank as fts_rank
    from vector_leg v
    full outer join fts_leg f on f.id = v.id
  ), normalised as (
    -- min-max within this candidate list; a chunk missing from a leg gets 0 for it
    select j.*,
           case when j.vector_score is null then 0.0 else coalesce(
             (j.vector_score - min(j.vector_score) over ()) /
             nullif(max(j.vector_score) over () - min(j.vector_score) over (), 0), 1.0) end as vector_norm,
           case when j.bm25_score is null then 0.0 else coalesce(
             (j.bm25_score - min(j.bm25_score) over ()) /
             nullif(max(j.bm25_score) over () - min(j.bm25_score) over (), 0), 1.0) end as fts_norm
    from joined j
  )
  select c.id, c.document_id, c.document_name, c.document_type, c.section_path,
         c.page_number, c.chunk_index, c.is_binding, c.superseded_by,
         c.content, c.token_count, c.metadata,
         n.vector_score, n.fts_score, n.bm25_score,
         case when fusion = 'rrf' then
                coalesce(vw / (rrf_k + n.vector_rank), 0) + coalesce(fw / (rrf_k + n.fts_rank), 0)
              else
                (vw * n.vector_norm + fw * n.fts_norm) / nullif(vw + fw, 0)
         end as fused_score,
         n.vector_rank, n.fts_rank
  from normalised n
  join knowledge_chunks c on c.id = n.id
  order by 16 desc, 1;
end
$$;

select arc_service_role_only('function',
  'hybrid_search(text, vector, integer, double precision, double precision, text, integer, text[], boolean, '
  'boolean, integer, integer, text, double precision, integer, text, date)');
