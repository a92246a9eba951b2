"""Accept negotiation and media type parsing (no torch needed)."""

import pytest

from sagebox_runtime import content_types as ct

ENC = ct.ENCODABLE


@pytest.mark.parametrize(
    "accept, want",
    [
        ("application/json", ct.JSON),
        ("text/csv", ct.CSV),
        ("application/x-npy", ct.NPY),
        ("Text/CSV; charset=utf-8", ct.CSV),  # case and parameters ignored
        ("application/json, text/csv", ct.JSON),  # first wins at equal q
        ("text/csv, application/json", ct.CSV),
        ("application/json;q=0.5, text/csv", ct.CSV),  # q honoured
        ("application/json;q=0.5, text/csv;q=0.9, application/x-npy;q=0.7", ct.CSV),
        ("text/plain, application/x-npy;q=0.1", ct.NPY),  # first supported
        ("image/png, */*;q=0.1", ct.JSON),  # wildcard -> default accept
        ("text/*", ct.CSV),
        ("application/*", ct.JSON),  # default accept matches the range
        ("application/json;q=0, */*", ct.CSV),  # q=0 excludes even under */*
        ("application/json;q=0", None),
        ("text/plain", None),
        ("application/json;q=abc", ct.JSON),  # unparsable q counts as 1
        ("  ,, text/csv ,", ct.CSV),
        ("*", ct.JSON),
    ],
)
def test_negotiate(accept, want):
    assert ct.negotiate(accept, ENC, ct.JSON) == want


def test_negotiate_default_accept_other_than_json():
    assert ct.negotiate("*/*", ENC, ct.CSV) == ct.CSV
    assert ct.negotiate("application/*", ENC, ct.NPY) == ct.NPY


@pytest.mark.parametrize(
    "accept, default, want",
    [
        ("", ct.JSON, ct.JSON),
        ("*/*", ct.CSV, ct.CSV),
        (" */* ", ct.CSV, ct.CSV),
        ("text/csv", ct.JSON, "text/csv"),
        ("*/*, text/csv", ct.JSON, "*/*, text/csv"),  # only exactly */* is defaulted
    ],
)
def test_effective_accept(accept, default, want):
    assert ct.effective_accept(accept, default) == want


@pytest.mark.parametrize(
    "accept, want",
    [
        ("application/json", ct.JSON),
        ("text/plain; charset=utf-8", "text/plain"),
        ("*/*, text/csv;q=0.5", ct.CSV),
        ("image/*", ct.JSON),
        ("a/b;q=0.2, c/d;q=0.8", "c/d"),
    ],
)
def test_concrete(accept, want):
    assert ct.concrete(accept, ct.JSON) == want


def test_parse_and_charset():
    assert ct.parse('Application/JSON; Charset="latin-1"') == ("application/json", {"charset": "latin-1"})
    assert ct.media_type("") == ""
    assert ct.media_type(None) == ""
    assert ct.charset("text/csv") == "utf-8"
    assert ct.charset("text/csv; charset=latin-1") == "latin-1"
