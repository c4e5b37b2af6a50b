"""The knowledge base layer: schema, codecs, queries and the search index. ingest/ writes
through it, app/ reads through it; it imports neither."""
