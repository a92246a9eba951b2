"""Reading rows of numbers from a request body: shared by both models of the
pipeline (each model.tar.gz carries a copy in code/)."""
import json


def parse_rows(body, content_type):
    """text/csv (one row per line) or application/json ([[...], ...] or
    {"instances": [[...], ...]}) → a list of lists of floats."""
    text = body.decode("utf-8") if isinstance(body, (bytes, bytearray)) else body
    media = (content_type or "").split(";")[0].strip().lower()
    if media == "text/csv":
        return [[float(v) for v in line.split(",")] for line in text.splitlines() if line.strip()]
    if media == "application/json":
        rows = json.loads(text)
        if isinstance(rows, dict):
            rows = rows["instances"]
        if rows and not isinstance(rows[0], list):
            rows = [rows]
        return [[float(v) for v in row] for row in rows]
    raise ValueError(f"unsupported content type {content_type!r}: send text/csv or application/json rows")
