-- Make the community's own vector table and HNSW index if it has none (the m and ef_construction
-- of 002's), and its vector leg.
--
-- The table (arc_community_vector_table_name) holds the community's chunk ids, the columns the leg
-- filters on and the embeddings; statement triggers on knowledge_chunks keep it whole
-- (arc_community_vectors_on_insert and the others, 096). The index lives there, not on
-- knowledge_chunks: the planner opens every index of a table it plans a statement on, once a
-- session, so a partial index per large community on knowledge_chunks made every new
-- connection's first plan of any search slower by each of them
-- (benchmarks/portfolio/results.md); on a table of its own it costs only that community's
-- searches.
--
-- The index holds the embeddings at half precision (halfvec, pgvector 0.7 and later): half the
-- size (44,783 chunks of 384 dimensions: 50 MB against 87), so the large communities' indexes
-- need half the memory to stay cached, for the same search time within the spread and 0.001 less
-- recall@40 (benchmarks/portfolio/precision.md). The leg reads the candidates in that order and
-- returns their full-precision distances. Without halfvec, or past its 4,000 dimensions, the
-- index is on the embedding as stored. An index of 094's kind (partial, on knowledge_chunks) is
-- dropped once this one is made.
create or replace function arc_community_vector_index(community text)
returns text
language plpgsql
set search_path = public, extensions
as $$
declare
  name text := arc_community_vector_index_name(community);
  tab text := arc_community_vector_table_name(community);
  dims integer;
begin
  if to_regclass(quote_ident(name)) is null then
    perform arc_community_vectors_lock(community, true);
    execute format('drop table if exists %I', tab);
    execute format('create table %I as select c.id, c.document_type, c.is_binding, c.superseded_by, c.embedding '
                   '  from knowledge_chunks c where c.community = %L', tab, community);
    execute format('alter table %I add constraint %I primary key (id)', tab,
                   arc_community_object_name('arc_vkey_', community));
    execute format('alter table %I enable row level security', tab);
    perform arc_service_role_only('table', quote_ident(tab));
    select a.atttypmod into dims
      from pg_attribute a
     where a.attrelid = 'knowledge_chunks'::regclass and a.attname = 'embedding';
    if to_regtype('halfvec') is not null and dims between 1 and 4000 then
      execute format('create index %I on %I using hnsw ((embedding::halfvec(%s)) halfvec_cosine_ops) '
                     'with (m = 16, ef_construction = 64)', name, tab, dims);
    else
      execute format('create index %I on %I using hnsw (embedding vector_cosine_ops) '
                     'with (m = 16, ef_construction = 64)', name, tab);
    end if;
  end if;
  execute format('drop index if exists %I', arc_community_object_name('knowledge_chunks_hnsw_', community));
  perform arc_community_vector_leg(community);
  return name;
end
$$;

select arc_service_role_only('function', 'arc_community_vector_index(text)');
