"""In-tree base context sources: ``shadow`` (scopes) and ``python`` (frames)."""
