"""Flag Atlas web app: FastAPI views over the knowledge base the ingest job writes."""
