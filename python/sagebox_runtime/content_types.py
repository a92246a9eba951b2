"""Media types: names, parsing, and Accept negotiation (stdlib only).

Rules (deliberate improvements over the toolkit, which matched exact strings):

* Types compare case-insensitively and MIME parameters are ignored, so
  ``Application/JSON; charset=utf-8`` is JSON.
* ``Accept`` is a comma list; ``q`` values are honoured (highest first, ties in
  the order given; ``q=0`` excludes a type). ``type/*`` and ``*/*`` match the
  server's default accept when it fits, else the first supported type.
* A missing Accept, or exactly ``*/*``, means the endpoint's default accept
  (``SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT``, default ``application/json``) —
  this part is exactly the toolkit's rule.
"""

from __future__ import annotations

import functools

JSON = "application/json"
CSV = "text/csv"
NPY = "application/x-npy"
NPZ = "application/x-npz"
OCTET_STREAM = "application/octet-stream"
ANY = "*/*"

# Request types whose body reaches input_fn as str instead of bytes.
UTF8_TYPES = (JSON, CSV)
# What the default input_fn decodes / the default output_fn encodes.
DECODABLE = (JSON, CSV, NPY, NPZ)
ENCODABLE = (JSON, CSV, NPY)


@functools.lru_cache(maxsize=512)
def parse(value):
    """(media type lower-cased, {param: value}) of a Content-Type value."""
    if not value:
        return "", {}
    parts = value.split(";")
    mtype = parts[0].strip().lower()
    params = {}
    for p in parts[1:]:
        k, sep, v = p.partition("=")
        if sep:
            params[k.strip().lower()] = v.strip().strip('"')
    return mtype, params


def media_type(value) -> str:
    """The bare, lower-cased media type of a Content-Type value ("" if none)."""
    return parse(value)[0] if value else ""


def charset(value, default="utf-8") -> str:
    return parse(value)[1].get("charset", default) if value else default


@functools.lru_cache(maxsize=512)
def parse_accept(accept):
    """Accept entries as a tuple of (media type, q), best first; q=0 dropped.

    Excluded (q=0) types are returned separately: (entries, excluded).
    """
    entries = []
    excluded = set()
    for pos, item in enumerate((accept or "").split(",")):
        mtype, params = parse(item)
        if not mtype:
            continue
        if mtype == "*":
            mtype = ANY
        if "/" not in mtype:
            continue
        q = 1.0
        if "q" in params:
            try:
                q = float(params["q"])
            except ValueError:
                q = 1.0
        if q <= 0:
            excluded.add(mtype)
            continue
        entries.append((-q, pos, mtype))
    entries.sort()
    return tuple((m, -nq) for nq, _, m in entries), frozenset(excluded)


def effective_accept(accept, default_accept) -> str:
    """The toolkit's defaulting: missing or exactly ``*/*`` -> default accept."""
    if not accept:
        return default_accept
    a = accept.strip()
    if not a or a == ANY:
        return default_accept
    return accept


@functools.lru_cache(maxsize=512)
def negotiate(accept, supported=ENCODABLE, default_accept=JSON):
    """The first supported media type ``accept`` allows, or None.

    ``accept`` should already have gone through :func:`effective_accept`.
    """
    entries, excluded = parse_accept(accept)
    default = media_type(default_accept)
    for mtype, _q in entries:
        if mtype == ANY:
            cands = supported
        elif mtype.endswith("/*"):
            prefix = mtype[:-1]
            cands = tuple(s for s in supported if s.startswith(prefix))
        else:
            if mtype in supported and mtype not in excluded:
                return mtype
            continue
        if default in cands and default not in excluded:
            return default
        for s in cands:
            if s not in excluded:
                return s
    return None


@functools.lru_cache(maxsize=512)
def concrete(accept, default_accept=JSON) -> str:
    """The response Content-Type to use when a handler returns only a body.

    The best (highest q) non-wildcard type in ``accept``, without parameters;
    the default accept when ``accept`` names no concrete type.
    """
    entries, _ = parse_accept(accept)
    for mtype, _q in entries:
        if "*" not in mtype:
            return mtype
    return media_type(default_accept) or default_accept
