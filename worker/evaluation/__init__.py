"""The evaluation harness (``arc-retrieval eval``): BEIR data in, retrieval metrics out."""
