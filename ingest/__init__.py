"""Flag Atlas ingest job: SGLang git history -> knowledge base (see kb.schema)."""
