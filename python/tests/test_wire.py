"""wire.py: framing, both directions, and the Go side's golden vectors."""

import base64
import json
import os
import socket
import struct
import threading

import pytest

from conftest import GOLDEN_DIR
from sagebox_runtime import wire


def test_frame_layout():
    assert wire.frame(wire.PING) == b"\x00\x00\x00\x01\x06"
    assert wire.frame(wire.HELLO, b"{}") == b"\x00\x00\x00\x03\x01{}"


def test_infer_bytes_by_hand():
    r = wire.Request(7, "application/json", "text/csv", [("X-A", "b")], b"[1]")
    got = wire.encode_infer([r])
    want = (
        struct.pack(">I", 1)
        + struct.pack(">Q", 7)
        + struct.pack(">I", 16) + b"application/json"
        + struct.pack(">I", 8) + b"text/csv"
        + struct.pack(">I", 1)
        + struct.pack(">I", 3) + b"X-A"
        + struct.pack(">I", 1) + b"b"
        + struct.pack(">I", 3) + b"[1]"
    )
    assert got == want
    assert wire.decode_infer(got) == [r]
    assert wire.decode_infer(memoryview(bytearray(got))) == [r]


def test_result_bytes_by_hand():
    ok = wire.Result(7, 200, "application/json", [("X-Amzn-SageMaker-Custom-Attributes", "k=v")], b"[2]")
    bad = wire.Result(8, 415, "", [], b"", "UnsupportedContentType", "nope", "tb")
    payload = wire.encode_result(1234, [ok, bad])
    want = (
        struct.pack(">QI", 1234, 2)
        + struct.pack(">QH", 7, 200)
        + struct.pack(">I", 16) + b"application/json"
        + struct.pack(">I", 1)
        + struct.pack(">I", 34) + b"X-Amzn-SageMaker-Custom-Attributes"
        + struct.pack(">I", 3) + b"k=v"
        + struct.pack(">I", 3) + b"[2]"
        + struct.pack(">III", 0, 0, 0)
        + struct.pack(">QH", 8, 415)
        + struct.pack(">I", 0)
        + struct.pack(">I", 0)
        + struct.pack(">I", 0)
        + struct.pack(">I", 22) + b"UnsupportedContentType"
        + struct.pack(">I", 4) + b"nope"
        + struct.pack(">I", 2) + b"tb"
    )
    assert payload == want
    assert wire.decode_result(payload) == (1234, [ok, bad])
    full = b"".join(wire.result_frame_parts(1234, [ok, bad]))
    assert wire.split_frame(full) == (wire.RESULT, payload)


def test_utf8_and_non_utf8_strings_round_trip():
    r = wire.Request(1, "text/csv; charset=utf-8", "", [("X-Name", "héllo ☃"), ("X-Raw", b"\xff\xfe".decode("utf-8", "surrogateescape"))], b"\x00\xff")
    assert wire.decode_infer(wire.encode_infer([r])) == [r]


def test_empty_batch():
    assert wire.decode_infer(wire.encode_infer([])) == []
    assert wire.decode_result(wire.encode_result(0, [])) == (0, [])


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        struct.pack(">I", 1),  # n=1 but no request
        struct.pack(">I", 1000000),  # absurd n
        wire.encode_infer([wire.Request(1, "a", "b", [], b"xyz")])[:-1],  # truncated body
        wire.encode_infer([wire.Request(1, "a", "b", [], b"xyz")]) + b"\x00",  # trailing
    ],
)
def test_malformed_infer(payload):
    with pytest.raises(wire.ProtocolError):
        wire.decode_infer(payload)


def test_connection_reassembles_fragmented_frames():
    a, b = socket.socketpair()
    conn = wire.Connection(b, bufsize=8)  # force buffer growth
    big = wire.Request(1, "application/x-npy", "", [], os.urandom(100000))
    data = wire.frame(wire.INFER, wire.encode_infer([big])) + wire.frame(wire.PING)

    def feed():
        for i in range(0, len(data), 777):
            a.sendall(data[i : i + 777])
        a.close()

    t = threading.Thread(target=feed)
    t.start()
    mtype, payload = conn.recv()
    assert mtype == wire.INFER
    assert wire.decode_infer(payload) == [big]
    assert conn.recv()[0] == wire.PING
    assert conn.recv() == (None, None)  # clean EOF at a frame boundary
    t.join()
    b.close()


def test_connection_eof_mid_frame():
    a, b = socket.socketpair()
    a.sendall(wire.frame(wire.HELLO, b"{}")[:-1])
    a.close()
    with pytest.raises(wire.ProtocolError):
        wire.Connection(b).recv()
    b.close()


def test_connection_max_frame():
    a, b = socket.socketpair()
    a.sendall(struct.pack(">IB", 1 << 20, wire.INFER))
    with pytest.raises(wire.ProtocolError, match="exceeds"):
        wire.Connection(b, max_frame=1024).recv()
    a.close()
    b.close()


# ------------------------------------------------------------- golden vectors
# internal/wire/testdata is written by the Go side (go test ./internal/wire
# -run TestGolden -update); its README.md describes vectors.json.

_VECTORS_PATH = os.path.join(GOLDEN_DIR, "vectors.json")
_NO_GOLDEN = "no golden vectors in internal/wire/testdata (written by the Go side)"


def _load_vectors():
    if not os.path.exists(_VECTORS_PATH):
        return {"version": None, "vectors": [], "invalid": []}
    with open(_VECTORS_PATH) as f:
        return json.load(f)


_V = _load_vectors()


def _read(name):
    with open(os.path.join(GOLDEN_DIR, name), "rb") as f:
        return f.read()


def _original(r):
    o = r.get("original")
    return None if o is None else (o["content_type"], o["accept"], base64.b64decode(o["body_b64"]))


def _requests(v):
    return [
        wire.Request(
            r["id"], r["content_type"], r["accept"], [tuple(h) for h in r["headers"]], base64.b64decode(r["body_b64"]),
            _original(r),
        )
        for r in v.get("requests") or []
    ]


def _responses(v):
    return [
        wire.Result(
            r["id"], r["status"], r["content_type"], [tuple(h) for h in r["headers"]], base64.b64decode(r["body_b64"]),
            r["error_type"], r["error_message"], r["traceback"],
        )
        for r in v.get("responses") or []
    ]


@pytest.mark.skipif(not _V["vectors"], reason=_NO_GOLDEN)
def test_golden_protocol_version():
    assert _V["version"] == wire.PROTOCOL_VERSION
    codes = {v["type"]: v["type_code"] for v in _V["vectors"]}
    for code, name in wire.NAMES.items():
        if name in codes:
            assert codes[name] == code, name


@pytest.mark.skipif(not _V["vectors"], reason=_NO_GOLDEN)
@pytest.mark.parametrize("v", _V["vectors"], ids=[v["name"] for v in _V["vectors"]])
def test_golden_vector(v):
    data = _read(v["file"])
    mtype, payload = wire.split_frame(data)
    assert mtype == v["type_code"]
    # The same bytes through the socket reader.
    a, b = socket.socketpair()
    a.sendall(data)
    a.close()
    got_type, got_payload = wire.Connection(b).recv()
    assert (got_type, bytes(got_payload)) == (mtype, payload)
    b.close()

    if mtype in (wire.HELLO, wire.LOAD, wire.LOADED):
        assert wire.decode_json(payload) == v["json"]  # parsed, not bytes
        assert wire.decode_json(wire.split_frame(wire.json_frame(mtype, v["json"]))[1]) == v["json"]
    elif mtype == wire.INFER:
        want = _requests(v)
        assert wire.decode_infer(payload, any(r.original is not None for r in want)) == want
        assert wire.frame(wire.INFER, wire.encode_infer(want)) == data  # byte-exact
    elif mtype == wire.RESULT:
        want = _responses(v)
        assert wire.decode_result(payload) == (v["handler_nanos"], want)
        assert b"".join(wire.result_frame_parts(v["handler_nanos"], want)) == data  # byte-exact
    else:
        assert payload == b""
        assert wire.frame(mtype) == data


_KINDS = {"truncated": wire.Truncated, "malformed": wire.Malformed, "too_large": wire.TooLarge}


def _decode_frame(mtype, payload):
    if mtype == wire.INFER:
        return wire.decode_infer(payload)
    if mtype == wire.RESULT:
        return wire.decode_result(payload)
    if mtype in (wire.HELLO, wire.LOAD, wire.LOADED):
        return wire.decode_json(payload)
    return None


@pytest.mark.skipif(not _V["invalid"], reason=_NO_GOLDEN)
@pytest.mark.parametrize("v", _V["invalid"], ids=[v["name"] for v in _V["invalid"]])
def test_golden_invalid(v):
    a, b = socket.socketpair()
    a.sendall(_read(v["file"]))
    a.close()
    conn = wire.Connection(b, max_frame=v["max_frame"])
    with pytest.raises(_KINDS[v["error"]]):
        mtype, payload = conn.recv()
        assert mtype is not None, "clean EOF where a frame was expected"
        _decode_frame(mtype, payload)
    b.close()


def test_connection_frames_sharing_reads():
    # Several frames per recv_into, one straddling the end of the buffer
    # (moved to the front), then a frame larger than the buffer (a new one).
    a, b = socket.socketpair()
    conn = wire.Connection(b, bufsize=64)
    small = [wire.frame(wire.INFER, wire.encode_infer([wire.Request(i, "a", "b", [("H", "v")], b"x" * 10)])) for i in range(5)]
    big = wire.frame(wire.INFER, wire.encode_infer([wire.Request(9, "", "", [], os.urandom(500))]))
    a.sendall(b"".join(small) + big + wire.frame(wire.PING))
    a.close()
    for i in range(5):
        mtype, payload = conn.recv()
        assert mtype == wire.INFER and wire.decode_infer(payload)[0].id == i
    mtype, payload = conn.recv()
    assert wire.decode_infer(payload)[0].body == wire.decode_infer(big[5:])[0].body
    assert conn.recv()[0] == wire.PING
    assert conn.recv() == (None, None)
    b.close()


def _sample_payloads():
    reqs = [
        wire.Request(1, "application/json", "text/csv", [("X-Long", "v" * 40), ("Host", "x")], b"[1, 2]"),
        wire.Request(2, "", "", [], b""),
        wire.Request(3, "c", "d", [("k", "v")], b"x" * 40),
    ]
    res = [
        wire.Result(1, 200, "application/json", [("h", "v")], b"{}", "", "", ""),
        wire.Result(2, 500, "", [], b"", "ValueError", "bad", "Traceback..."),
    ]
    return wire.encode_infer(reqs), wire.encode_result(7, res)


def test_every_truncation_is_a_protocol_error():
    # A payload cut anywhere must fail as a ProtocolError (which the worker
    # reports and exits on), never as struct.error or IndexError.
    infer, result = _sample_payloads()
    for payload, decode in ((infer, wire.decode_infer), (result, wire.decode_result)):
        for cut in range(len(payload)):
            with pytest.raises(wire.ProtocolError):
                decode(payload[:cut])


def test_corrupted_payloads_fail_only_as_protocol_errors():
    import random

    rnd = random.Random(1)
    infer, result = _sample_payloads()
    for payload, decode in ((infer, wire.decode_infer), (result, wire.decode_result)):
        for _ in range(3000):
            b = bytearray(payload)
            for _ in range(rnd.randint(1, 4)):
                b[rnd.randrange(len(b))] = rnd.randrange(256)
            try:
                out = decode(bytes(b))
            except wire.ProtocolError:
                continue
            if decode is wire.decode_infer:
                for r in out:  # lazily decoded headers must decode too
                    r.headers


def test_infer_with_original_round_trip():
    big = os.urandom(70000)
    reqs = [
        wire.Request(1, "application/json", "", [("A", "1")], b"[1]", ("text/csv", "text/csv", b"1,2")),
        wire.Request(2, "", "", [], big, ("", "", big)),
    ]
    payload = wire.encode_infer(reqs)
    assert wire.decode_infer(payload, True) == reqs
    assert wire.decode_infer(memoryview(bytearray(payload)), True) == reqs
    with pytest.raises(wire.ProtocolError):
        wire.decode_infer(payload)  # the trailer is not expected: trailing bytes
    with pytest.raises(wire.Truncated):
        wire.decode_infer(payload[:-1], True)
