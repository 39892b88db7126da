"""In-tree sinks, registered through the same hook as third-party ones."""
