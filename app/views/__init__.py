"""One module per page kind; each exposes `router` with an HTML route and its /api twin."""
