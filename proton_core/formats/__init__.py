"""Profile file formats, one module each holding its writer and its reader.

Keeping both directions of a format side by side is what keeps them in step;
sinks only register a format's writer, and the data model knows no format.
"""
