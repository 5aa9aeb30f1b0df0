"""The columnar store: Delta Lake tables derived from the session logs."""
