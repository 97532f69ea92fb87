"""Where the knowledge base lives: the Postgres connection and migrations, the embedded Postgres
for a machine without one, the SQL files, BM25 upkeep, the query log and the documents' listing."""
