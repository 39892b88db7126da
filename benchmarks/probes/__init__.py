"""One-off GPU diagnostics (memory growth, PC sampling): each answers one question, outside the matrix."""
