"""In-tree backends."""
