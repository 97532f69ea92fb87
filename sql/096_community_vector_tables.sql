-- 096: a large community's HNSW index moves off knowledge_chunks, onto a table of its own.
--
-- 094 gave each community past arc_community_index_min_chunks() a partial HNSW index on
-- knowledge_chunks. The planner opens every index of a table once a session to plan a statement
-- on it, so each one made the first search of every new connection slower, whatever community it
-- asked about: about 0.06 ms per large community at 5,000 communities (benchmarks/portfolio/).
-- Now such a community has a vector table (its chunk ids, the columns the vector leg filters on,
-- the embeddings) with the index on it (arc_community_vector_index), and knowledge_chunks keeps
-- the same few indexes however many communities grow large. The triggers below keep each table
-- whole through every insert, update, delete and truncate of knowledge_chunks.
drop trigger if exists knowledge_chunks_vectors_insert on knowledge_chunks;
create trigger knowledge_chunks_vectors_insert after insert on knowledge_chunks
  referencing new table as new_rows for each statement execute function arc_community_vectors_on_insert();
drop trigger if exists knowledge_chunks_vectors_update on knowledge_chunks;
create trigger knowledge_chunks_vectors_update after update on knowledge_chunks
  referencing old table as old_rows new table as new_rows
  for each statement execute function arc_community_vectors_on_update();
drop trigger if exists knowledge_chunks_vectors_delete on knowledge_chunks;
create trigger knowledge_chunks_vectors_delete after delete on knowledge_chunks
  referencing old table as old_rows for each statement execute function arc_community_vectors_on_delete();
drop trigger if exists knowledge_chunks_vectors_truncate on knowledge_chunks;
create trigger knowledge_chunks_vectors_truncate after truncate on knowledge_chunks
  for each statement execute function arc_community_vectors_on_truncate();

-- A table made earlier in this upgrade (by 033's or 095's call, before these triggers) is brought
-- up to date with its community's chunks.
do $$
declare
  c text;
  tab text;
begin
  for c in select b.community from bm25_corpus b
            where to_regclass(quote_ident(arc_community_vector_table_name(b.community))) is not null loop
    tab := arc_community_vector_table_name(c);
    execute format('delete from %I v where not exists (select 1 from knowledge_chunks k '
                   ' where k.id = v.id and k.community = $1)', tab) using c;
    execute format('update %I v set document_type = k.document_type, is_binding = k.is_binding, '
                   '       superseded_by = k.superseded_by, embedding = k.embedding '
                   '  from knowledge_chunks k where k.id = v.id '
                   '   and ((v.document_type, v.is_binding, v.superseded_by) is distinct from '
                   '        (k.document_type, k.is_binding, k.superseded_by) or v.embedding is distinct from k.embedding)', tab);
    execute format('insert into %I (id, document_type, is_binding, superseded_by, embedding) '
                   'select k.id, k.document_type, k.is_binding, k.superseded_by, k.embedding '
                   '  from knowledge_chunks k where k.community = $1 '
                   '   and not exists (select 1 from %I v where v.id = k.id)', tab, tab) using c;
  end loop;
end
$$;

-- Every partial index of 094 becomes a table and an index (arc_community_vector_indexes); every
-- document, answer and calibration stays. Meanwhile the community is read exactly.
select arc_community_vector_indexes();
