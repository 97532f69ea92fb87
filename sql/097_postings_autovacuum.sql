-- 097: autovacuum comes by the postings soon after a load, however many the table holds.
--
-- The full-text leg reads bm25_postings by an index-only scan of its impact index (012, 030); a
-- posting on a page the visibility map does not yet mark all-visible is checked against the
-- table's heap as well, so a load's postings are read at a heap fetch each until a vacuum marks
-- their pages. Autovacuum's insert threshold scales with the table (1,000 + 0.2 x its rows by
-- default): in a portfolio of 92.8M postings a community loaded today waited for 18.6M more
-- inserts, the largest one's searches meanwhile paying the heap fetches
-- (benchmarks/postings_visibility/results.md). A fixed threshold brings autovacuum within a
-- minute or so of 100,000 new postings (a large community's load, or a few small ones). Such a
-- vacuum reads only the pages not yet all-visible and, with no dead rows, skips the indexes.
-- Deletes keep autovacuum's defaults: their vacuum walks every index of the table.
alter table bm25_postings set (autovacuum_vacuum_insert_scale_factor = 0,
                               autovacuum_vacuum_insert_threshold = 100000);
