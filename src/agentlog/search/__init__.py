"""Full-text search over everything recorded: the tantivy index, its query language, the hits' places."""
