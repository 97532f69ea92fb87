-- Make the community's index if it has none (the m and ef_construction of 002's), and its vector
-- leg. The index holds the embeddings at half precision (halfvec, pgvector 0.7 and later): half
-- the size (44,783 chunks of 384 dimensions: 50 MB against 87), so the large communities' indexes
-- need half the memory to stay cached, for the same search time within the spread and 0.001 less
-- recall@40 (benchmarks/portfolio/precision.md). The leg reads the candidates in that order and
-- returns their full-precision distances. Without halfvec, or past its 4,000 dimensions, the
-- index is on the embedding as stored.
create or replace function arc_community_vector_index(community text)
returns text
language plpgsql
set search_path = public, extensions
as $$
declare
  name text := arc_community_vector_index_name(community);
  dims integer;
begin
  if to_regclass(quote_ident(name)) is null then
    select a.atttypmod into dims
      from pg_attribute a
     where a.attrelid = 'knowledge_chunks'::regclass and a.attname = 'embedding';
    if to_regtype('halfvec') is not null and dims between 1 and 4000 then
      execute format('create index %I on knowledge_chunks using hnsw ((embedding::halfvec(%s)) halfvec_cosine_ops) '
                     'with (m = 16, ef_construction = 64) where community = %L', name, dims, community);
    else
      execute format('create index %I on knowledge_chunks using hnsw (embedding vector_cosine_ops) '
                     'with (m = 16, ef_construction = 64) where community = %L', name, community);
    end if;
  end if;
  perform arc_community_vector_leg(community);
  return name;
end
$$;

select arc_service_role_only('function', 'arc_community_vector_index(text)');
