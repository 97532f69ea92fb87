-- Read the large communities' full-text pages into shared buffers: each community's rows of
-- knowledge_chunks (the full-text leg scores its candidates from their stored weights) and its range
-- of the postings' impact index (each question word's best chunks), largest community first.
--
-- A large community's question reads its words' postings and scores a few hundred of its chunks,
-- a different few hundred each question; until most of its pages have been read once, a question
-- reads some of them from the operating system rather than shared buffers, which is most of the
-- spread of its search time (benchmarks/portfolio/warm.md). The serving worker calls this at its
-- start, in the background, so the first questions after a restart find those pages cached; an
-- admin may call it after a restart of the database (`select * from arc_warm_communities()`).
--
-- Bounded: communities of arc_community_index_min_chunks() chunks or more (a smaller one is read
-- in a millisecond or two either way), within `share` of shared_buffers in all (each community's
-- pages estimated from the table's and the index's average per chunk), so the warming never
-- pushes out more than that share of what other communities have cached; a community that does
-- not fit in what is left is passed over for the next smaller one. One caller at a time: another
-- call meanwhile returns nothing at once (several worker processes start together).
-- Returns each community read, its chunks and its estimated pages.
create or replace function arc_warm_communities(share double precision default 0.25)
returns table (community text, chunks bigint, pages bigint)
language plpgsql
set search_path = public, extensions
-- the community's rows through the btree on community, its postings through the impact index
set enable_seqscan = off
as $$
#variable_conflict use_column
declare
  budget   double precision;
  per_row  double precision;
  per_post double precision;
  total    double precision;
  need     double precision;
  r        record;
begin
  if share is null or share <= 0 or share > 1 then
    raise exception 'share must be above 0 and at most 1' using errcode = '22023';
  end if;
  if not pg_try_advisory_xact_lock(hashtext('arc_warm_communities')) then
    return;
  end if;
  select share * s.setting::double precision into budget from pg_settings s where s.name = 'shared_buffers';
  select sum(b.n_docs) into total from bm25_corpus b;
  select c.relpages / nullif(c.reltuples, 0) into per_row
    from pg_class c where c.oid = 'knowledge_chunks'::regclass and c.reltuples > 0;
  select c.relpages / nullif(total, 0) into per_post
    from pg_class c where c.oid = 'bm25_postings_community_impact'::regclass;
  if per_row is null or per_post is null then
    return;  -- never analysed (or empty): no estimate, so nothing is read
  end if;
  for r in select b.community, b.n_docs from bm25_corpus b
            where b.n_docs >= arc_community_index_min_chunks()
            order by b.n_docs desc, b.community loop
    need := r.n_docs * (per_row + per_post);
    continue when need > budget;
    -- bm25 is in no index, so its rows' heap pages are read, not only the btree's
    perform count(c.bm25) from knowledge_chunks c where c.community = r.community;
    perform count(*) from bm25_postings p where p.community = r.community;
    budget := budget - need;
    community := r.community;
    chunks := r.n_docs::bigint;
    pages := ceil(need)::bigint;
    return next;
  end loop;
end
$$;

select arc_service_role_only('function', 'arc_warm_communities(double precision)');
