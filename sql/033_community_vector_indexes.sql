-- 033: every community of a knowledge base of several gets an HNSW index of its own.
--
-- 031 filters the one HNSW index on the community while it scans (pgvector 0.8's iterative
-- scans keep going until match_count rows pass). That is right while a community is much of the
-- index; a community that is a small share of it (100 communities of 10k chunks: 1%) makes the
-- scan walk past other communities' chunks, nearly all of them: at 1M chunks the vector leg
-- took 94 ms p95 for a recall@40 of 0.955 (some questions 0.575), and neither strict order, a
-- larger ef_search nor hnsw.max_scan_tuples helped (benchmarks/scale/communities/). A partial
-- index per community (`where community = '...'`) holds that community's graph alone: the
-- vector leg searches 10k chunks, not 1M: 7.5 ms p95 at recall@40 0.996 there. hybrid_search
-- (031) reads the community's own index when there is one and the global index otherwise.
--
-- When: a knowledge base of one community keeps only the global index (it is that community's
-- index; a second one would hold the same rows). At the commit of a load that brings a second
-- community (or any later one), every community holding chunks and no index of its own gets one
-- (a deferred trigger: CREATE INDEX cannot run while the load's statement still uses the table).
-- The first community's index is built then, once; any build reads the whole table to find its
-- community's rows (6 s for 10k chunks among 1M here, the table's 1.5 GB read included), and
-- holds off other writers (never searches) until the load commits. A build that fails
-- (rights, memory) leaves the community on the global index and lets the load commit; call
-- `select arc_community_vector_indexes()` to try again. The global index stays: it answers a
-- community without an index of its own; drop it only if every community has one.
-- arc: repeatable (function definitions, a trigger and their rights: applied again whenever this file changes)

-- The names of a community's objects: readable in \di and \df, and at most 63 characters for
-- any community name (030) after either prefix below. (The cut at 41 characters stays as it was
-- first written: a name that changed would orphan an existing index or leg.)
create or replace function arc_community_object_name(prefix text, community text)
returns text
language sql immutable parallel safe
set search_path = public, extensions
as $$
  select prefix || case when length(community) <= 41 then community
                        else left(community, 32) || '_' || left(md5(community), 8) end
$$;

create or replace function arc_community_vector_index_name(community text)
returns text
language sql immutable parallel safe
set search_path = public, extensions
as $$
  select arc_community_object_name('knowledge_chunks_hnsw_', community)
$$;

-- The community's vector leg, as a function of its own: the statement hybrid_search (031) would
-- otherwise plan on every call (EXECUTE), with the community as a literal so that the plan reads
-- the partial index, and sorting off (else a type filter reads the community through the btree).
-- Here that plan is made once a session and kept: planning it looks at every index of
-- knowledge_chunks, one per community, about 0.7 ms of each search at 100 communities and
-- growing with their number (benchmarks/scale/communities/).
create or replace function arc_community_vector_leg_name(community text)
returns text
language sql immutable parallel safe
set search_path = public, extensions
as $$
  select arc_community_object_name('arc_vector_leg_', community)
$$;

-- The leg's statement, in one place for the leg function below and for 031, which plans it
-- itself for an index made by hand (one without a leg): $1 the question's vector, $2 the
-- document types (null: any), $3 binding only, $4 superseded included, $5 how many rows.
create or replace function arc_community_vector_leg_statement(community text)
returns text
language sql immutable parallel safe
set search_path = public, extensions
as $$
  select format('select c.id, c.embedding <=> $1 as distance
                   from knowledge_chunks c
                  where c.community = %L
                    and ($2 is null or (c.document_type || '''') = any ($2))
                    and (not $3 or c.is_binding)
                    and ($4 or c.superseded_by is null)
                  order by c.embedding <=> $1
                  limit $5', community)
$$;

create or replace function arc_community_vector_leg(community text)
returns text
language plpgsql
set search_path = public, extensions
as $$
declare
  name text := arc_community_vector_leg_name(community);
begin
  execute format($f$
    create or replace function %I(query_embedding vector, document_types text[], binding_only boolean,
                                  include_superseded boolean, match_count integer)
    returns table (id bigint, distance double precision)
    language plpgsql stable
    set search_path = public, extensions
    set enable_seqscan = off
    set enable_sort = off
    set plan_cache_mode = force_generic_plan
    as $body$
    begin
      return query %s;
    end
    $body$
  $f$, name, arc_community_vector_leg_statement(community));
  perform arc_service_role_only('function', format('%I(vector, text[], boolean, boolean, integer)', name));
  return name;
end
$$;

-- Make the community's index if it has none (same opclass, m and ef_construction as 002's), and
-- its vector leg.
create or replace function arc_community_vector_index(community text)
returns text
language plpgsql
set search_path = public, extensions
as $$
declare
  name text := arc_community_vector_index_name(community);
begin
  if to_regclass(quote_ident(name)) is null then
    execute format('create index %I on knowledge_chunks using hnsw (embedding vector_cosine_ops) '
                   'with (m = 16, ef_construction = 64) where community = %L', name, community);
  end if;
  perform arc_community_vector_leg(community);
  return name;
end
$$;

-- Every community holding chunks gets its index, once the knowledge base holds several.
-- Returns the communities it made an index for. (A community with an index and no vector leg,
-- from before the legs were made, gets its leg, quietly.)
create or replace function arc_community_vector_indexes()
returns setof text
language plpgsql
set search_path = public, extensions
as $$
declare
  c text;
begin
  if (select count(*) from bm25_corpus where n_docs > 0) < 2 then
    return;
  end if;
  for c in select b.community from bm25_corpus b
            where b.n_docs > 0 and to_regclass(quote_ident(arc_community_vector_index_name(b.community))) is null
            order by b.community loop
    perform arc_community_vector_index(c);
    return next c;
  end loop;
  for c in select b.community from bm25_corpus b
            where to_regclass(quote_ident(arc_community_vector_index_name(b.community))) is not null
              and to_regprocedure(format('%I(vector, text[], boolean, boolean, integer)',
                                         arc_community_vector_leg_name(b.community))) is null
            order by b.community loop
    perform arc_community_vector_leg(c);
  end loop;
end
$$;

create or replace function arc_community_vector_indexes_on_commit() returns trigger
language plpgsql
set search_path = public, extensions
as $$
begin
  begin
    perform arc_community_vector_indexes();
  exception when others then
    raise warning 'arc-retrieval: no vector index of its own for a community (%): it is searched through the '
                  'global index; run select arc_community_vector_indexes() to try again', sqlerrm;
  end;
  return null;
end
$$;

-- A community's first chunks (030 counts them in its corpus row) defer the index to the end of
-- the transaction.
drop trigger if exists bm25_corpus_community_vector_index on bm25_corpus;
create constraint trigger bm25_corpus_community_vector_index
  after update of n_docs on bm25_corpus deferrable initially deferred
  for each row when (old.n_docs = 0 and new.n_docs > 0)
  execute function arc_community_vector_indexes_on_commit();

-- A knowledge base already holding several communities gets their indexes now.
select arc_community_vector_indexes();

select arc_service_role_only('function', f)
  from unnest(array['arc_community_object_name(text, text)', 'arc_community_vector_index_name(text)',
                    'arc_community_vector_index(text)', 'arc_community_vector_leg_name(text)',
                    'arc_community_vector_leg_statement(text)', 'arc_community_vector_leg(text)',
                    'arc_community_vector_indexes()', 'arc_community_vector_indexes_on_commit()']) f;
