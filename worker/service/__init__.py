"""The knowledge-base service every door calls: ask, ingest, delete, list (knowledge.py), the
parts it is built from (build.py), admission control (admission.py) and the answer record
(answer_log.py). The doors (serve/, cli.py) parse their input, call it and render its result."""
