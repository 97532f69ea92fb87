-- 001: extensions. pgvector gives the vector and sparsevec types and the HNSW index.
-- Supabase: Database > Extensions shows it as "vector"; this line is enough.
create extension if not exists vector;
