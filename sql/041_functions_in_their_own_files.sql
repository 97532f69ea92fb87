-- 041: the functions live in sql/functions/, one file each, applied before the numbered files
-- whenever their text changes; the numbered files keep the tables. A database made by an earlier
-- release is left with what that layout gave it, and here it gets what a fresh install has:
--
--   * the trigger functions 030 replaced with per-community ones (bm25_community_stats_*,
--     knowledge_base_touch_communities) go: no trigger runs them;
--   * the records of the files that held only functions (now in sql/functions/) or the
--     extensions (sql/extensions.sql) go from schema_migrations, so that it names the files there are.
drop function if exists bm25_stats_on_insert();
drop function if exists bm25_stats_on_delete();
drop function if exists bm25_stats_on_update();
drop function if exists bm25_stats_on_truncate();
drop function if exists knowledge_base_touch();

delete from schema_migrations
 where name in ('000_rights', '001_extensions', '004_hybrid_search', '005_chunk_neighbours',
                '014_bm25_lock_order', '020_word_frequencies', '031_hybrid_search_communities',
                '032_word_frequencies_communities', '034_calibration_sample');
