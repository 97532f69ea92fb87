-- 095: a knowledge base of several communities drops the global HNSW index (002) once every
-- community past arc_community_index_min_chunks() has an index of its own: no search reads it
-- then, and every write and vacuum still paid for it (arc_community_vector_indexes). Every
-- document, answer and calibration stays. A database of one community keeps it.
select arc_community_vector_indexes();
