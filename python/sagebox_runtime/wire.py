"""Framing for the model-server worker protocol (Python side).

The contract is internal/wire/doc.go; this module is its mirror and imports
nothing beyond the standard library, so it can be loaded (and tested) without
torch.

Every message is one frame::

    u32 length of (type byte + payload), big-endian | u8 type | payload

A "str"/"bytes" field is a u32 length followed by that many bytes (UTF-8 for
str). Both directions are implemented (the worker only needs to decode INFER
and encode RESULT, tests need the reverse) so the golden vectors written by
the Go side can be checked byte for byte.

Strings are decoded with ``surrogateescape`` and encoded the same way, so a
header value that is not valid UTF-8 survives a round trip unchanged.
"""

from __future__ import annotations

import json
import struct

HELLO = 0x01
LOAD = 0x02
LOADED = 0x03
INFER = 0x04
RESULT = 0x05
PING = 0x06
PONG = 0x07

NAMES = {
    HELLO: "HELLO",
    LOAD: "LOAD",
    LOADED: "LOADED",
    INFER: "INFER",
    RESULT: "RESULT",
    PING: "PING",
    PONG: "PONG",
}

PROTOCOL_VERSION = 1

_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_FRAME_HEAD = struct.Struct(">IB")  # length, type
_RESULT_HEAD = struct.Struct(">QI")  # handler_nanos, n
_ITEM_HEAD = struct.Struct(">QH")  # id, status
_OK_HEAD = struct.Struct(">QHI")  # id, status, content_type length
_U32X2 = struct.Struct(">II")
_EMPTY3 = b"\x00" * 12  # three empty strs
_ID_LEN = struct.Struct(">QI")  # request id, content_type length
_u32_from = _U32.unpack_from
_id_len_from = _ID_LEN.unpack_from

_ENC = "utf-8"
_ERR = "surrogateescape"


class ProtocolError(Exception):
    """The peer sent something this side does not understand."""


class Truncated(ProtocolError):
    """The stream or a field ends early (a count that cannot fit included)."""


class Malformed(ProtocolError):
    """Complete but wrong framing: length 0, bytes after the last element."""


class TooLarge(ProtocolError):
    """A frame's length prefix exceeds the maximum frame size."""


class Request:
    """One request of an INFER batch.

    ``headers`` is decoded on first use: most handlers never read request
    headers, and decoding them is a third of a batch's decoding time.
    """

    __slots__ = ("id", "content_type", "accept", "_headers", "_raw", "body", "original")

    def __init__(self, id, content_type, accept, headers, body, original=None):
        self.id = id
        self.content_type = content_type
        self.accept = accept
        self._headers = headers  # list of (name, value) pairs, wire order
        self._raw = None  # (bytes, count) of the encoded headers while undecoded
        self.body = body  # bytes
        # (content_type, accept, body) of the request the model server
        # received, for a serial pipeline's later stages (LOAD's
        # original_request); None when this request is the original.
        self.original = original

    @classmethod
    def _lazy(cls, id, content_type, accept, raw, count, body, original=None):
        r = cls(id, content_type, accept, None, body, original)
        r._raw = (raw, count)
        return r

    @property
    def headers(self):
        h = self._headers
        if h is None:
            raw, count = self._raw
            h = self._headers = _decode_headers(raw, count)
            self._raw = None
        return h

    @headers.setter
    def headers(self, value):
        self._headers, self._raw = value, None

    def __repr__(self):
        return "Request(id=%d, content_type=%r, accept=%r, %d headers, %d bytes)" % (
            self.id,
            self.content_type,
            self.accept,
            len(self.headers),
            len(self.body),
        )

    def __eq__(self, other):
        return isinstance(other, Request) and all(
            getattr(self, k) == getattr(other, k) for k in ("id", "content_type", "accept", "headers", "body", "original")
        )


def _decode_headers(raw, count):
    """Header pairs of an encoded header block already bounds-checked."""
    out = []
    off = 0
    for _ in range(count):
        (k,) = _u32_from(raw, off)
        off += 4
        name = str(raw[off : off + k], _ENC, _ERR)
        off += k
        (k,) = _u32_from(raw, off)
        off += 4
        out.append((name, str(raw[off : off + k], _ENC, _ERR)))
        off += k
    return out


class Result:
    """The answer for one request of a batch."""

    __slots__ = (
        "id",
        "status",
        "content_type",
        "headers",
        "body",
        "error_type",
        "error_message",
        "traceback",
    )

    def __init__(
        self,
        id,
        status=200,
        content_type="",
        headers=(),
        body=b"",
        error_type="",
        error_message="",
        traceback="",
    ):
        self.id = id
        self.status = status
        self.content_type = content_type
        self.headers = headers
        self.body = body
        self.error_type = error_type
        self.error_message = error_message
        self.traceback = traceback

    def __repr__(self):
        if self.status >= 400:
            return "Result(id=%d, status=%d, %s: %s)" % (
                self.id,
                self.status,
                self.error_type,
                self.error_message,
            )
        return "Result(id=%d, status=%d, content_type=%r, %d bytes)" % (
            self.id,
            self.status,
            self.content_type,
            len(self.body),
        )

    def __eq__(self, other):
        return isinstance(other, Result) and all(
            getattr(self, k) == getattr(other, k) for k in self.__slots__
        )


# ---------------------------------------------------------------- encoding


def frame(mtype: int, payload=b"") -> bytes:
    """A complete frame (length prefix, type byte, payload)."""
    return _FRAME_HEAD.pack(len(payload) + 1, mtype) + payload


def json_frame(mtype: int, obj) -> bytes:
    return frame(mtype, json.dumps(obj, separators=(",", ":")).encode(_ENC))


def _put_str(parts: list, s: str):
    b = s.encode(_ENC, _ERR)
    parts.append(_U32.pack(len(b)))
    parts.append(b)


def _put_bytes(parts: list, b):
    parts.append(_U32.pack(len(b)))
    parts.append(b)


def _put_headers(parts: list, headers):
    parts.append(_U32.pack(len(headers)))
    for name, value in headers:
        _put_str(parts, name)
        _put_str(parts, value)


def encode_infer(requests) -> bytes:
    """INFER payload (no frame header) for a list of Request."""
    parts = [_U32.pack(len(requests))]
    for r in requests:
        parts.append(_U64.pack(r.id))
        _put_str(parts, r.content_type)
        _put_str(parts, r.accept)
        _put_headers(parts, r.headers)
        _put_bytes(parts, r.body)
        if r.original is not None:  # only for a worker whose LOAD set original_request
            octype, oaccept, obody = r.original
            _put_str(parts, octype)
            _put_str(parts, oaccept)
            _put_bytes(parts, obody)
    return b"".join(parts)


def result_frame_parts(handler_nanos: int, results) -> list:
    """The parts of a complete RESULT frame (header included), to be joined.

    Kept as a list so the worker can join once and write with one sendall.
    This runs once per batch on the worker's hot path: an answer without
    headers or error fields (the common case) takes three parts.
    """
    parts = [b"", _RESULT_HEAD.pack(handler_nanos, len(results))]
    append = parts.append
    for r in results:
        ctype = r.content_type
        ctype = ctype.encode(_ENC, _ERR) if ctype else b""
        body = r.body
        if not (r.headers or r.error_type or r.error_message or r.traceback):
            # id, status, content_type length | content_type | nh=0, body length | body | 3 empty strs
            append(_OK_HEAD.pack(r.id, r.status, len(ctype)) + ctype + _U32X2.pack(0, len(body)))
            append(body)
            append(_EMPTY3)
            continue
        append(_ITEM_HEAD.pack(r.id, r.status))
        _put_bytes(parts, ctype)
        _put_headers(parts, r.headers)
        _put_bytes(parts, body)
        _put_str(parts, r.error_type or "")
        _put_str(parts, r.error_message or "")
        _put_str(parts, r.traceback or "")
    size = 1
    for p in parts:
        size += len(p)
    parts[0] = _FRAME_HEAD.pack(size, RESULT)
    return parts


def encode_result(handler_nanos: int, results) -> bytes:
    """RESULT payload (no frame header)."""
    return b"".join(result_frame_parts(handler_nanos, results)[1:])


# ---------------------------------------------------------------- decoding


class _Reader:
    """Sequential reader over a bytes-like payload."""

    __slots__ = ("buf", "off", "end")

    def __init__(self, buf):
        self.buf = buf
        self.off = 0
        self.end = len(buf)

    def _need(self, n):
        if self.off + n > self.end:
            raise Truncated(
                "truncated payload: need %d bytes at offset %d of %d"
                % (n, self.off, self.end)
            )

    def u16(self):
        self._need(2)
        (v,) = _U16.unpack_from(self.buf, self.off)
        self.off += 2
        return v

    def u32(self):
        self._need(4)
        (v,) = _U32.unpack_from(self.buf, self.off)
        self.off += 4
        return v

    def u64(self):
        self._need(8)
        (v,) = _U64.unpack_from(self.buf, self.off)
        self.off += 8
        return v

    def raw(self):
        n = self.u32()
        self._need(n)
        start = self.off
        self.off = start + n
        return bytes(self.buf[start : self.off])

    def str(self):
        n = self.u32()
        self._need(n)
        start = self.off
        self.off = start + n
        if n == 0:
            return ""
        return str(self.buf[start : self.off], _ENC, _ERR)

    def headers(self):
        nh = self.u32()
        # Each header takes at least 8 bytes; refuse absurd counts early.
        self._need(nh * 8)
        s = self.str
        return [(s(), s()) for _ in range(nh)]

    def done(self):
        if self.off != self.end:
            raise Malformed(
                "%d trailing bytes after the last field" % (self.end - self.off)
            )


def _truncated(n, off, end):
    return Truncated("truncated payload: need %d bytes at offset %d of %d" % (n, off, end))


def decode_infer(payload, original=False) -> list:
    """Requests of an INFER payload (bytes or memoryview, no frame header).

    With ``original`` (LOAD's original_request) every element ends with the
    original request's content type, accept and body, which land in
    ``Request.original``.

    The worker's hot path: one pass with the bounds checks inlined (it is
    equivalent to reading the fields one by one with _Reader).
    """
    buf = payload
    end = len(buf)
    if end < 4:
        raise _truncated(4, 0, end)
    (n,) = _u32_from(buf, 0)
    off = 4
    if off + n * 24 > end:  # smallest request: id + 4 empty lengths
        raise _truncated(n * 24, off, end)
    out = []
    for _ in range(n):
        if off + 12 > end:
            raise _truncated(12, off, end)
        rid, k = _id_len_from(buf, off)
        off += 12
        e = off + k
        if e + 4 > end:
            raise _truncated(k + 4, off, end)
        ctype = str(buf[off:e], _ENC, _ERR) if k else ""
        (k,) = _u32_from(buf, e)
        off = e + 4
        e = off + k
        if e + 4 > end:
            raise _truncated(k + 4, off, end)
        accept = str(buf[off:e], _ENC, _ERR) if k else ""
        (nh,) = _u32_from(buf, e)
        off = e + 4
        if off + nh * 8 > end:  # each header takes at least 8 bytes
            raise _truncated(nh * 8, off, end)
        hs = off  # the header block is checked here, decoded on first use
        for _ in range(nh):
            if off + 4 > end:
                raise _truncated(4, off, end)
            (k,) = _u32_from(buf, off)
            e = off + 4 + k
            if e + 4 > end:
                raise _truncated(k + 4, off + 4, end)
            (k,) = _u32_from(buf, e)
            off = e + 4 + k
            if off > end:
                raise _truncated(k, e + 4, end)
        raw = bytes(buf[hs:off]) if nh else b""
        if off + 4 > end:
            raise _truncated(4, off, end)
        (k,) = _u32_from(buf, off)
        off += 4
        e = off + k
        if e > end:
            raise _truncated(k, off, end)
        body = bytes(buf[off:e])
        off = e
        orig = None
        if original:
            rd = _Reader(buf)
            rd.off, rd.end = off, end
            orig = (rd.str(), rd.str(), rd.raw())
            off = rd.off
        out.append(Request._lazy(rid, ctype, accept, raw, nh, body, orig))
    if off != end:
        raise Malformed("%d trailing bytes after the last field" % (end - off))
    return out


def decode_result(payload):
    """(handler_nanos, [Result]) of a RESULT payload (no frame header)."""
    rd = _Reader(payload)
    nanos = rd.u64()
    n = rd.u32()
    out = []
    for _ in range(n):
        rid = rd.u64()
        status = rd.u16()
        ctype = rd.str()
        headers = rd.headers()
        body = rd.raw()
        out.append(Result(rid, status, ctype, headers, body, rd.str(), rd.str(), rd.str()))
    rd.done()
    return nanos, out


def decode_json(payload):
    try:
        return json.loads(str(payload, _ENC))
    except (UnicodeDecodeError, ValueError) as e:
        raise Malformed("payload is not JSON: %s" % e) from None


def split_frame(data):
    """(type, payload) of one complete frame given as bytes (for tests)."""
    if len(data) < 5:
        raise Truncated("frame shorter than its header")
    length, mtype = _FRAME_HEAD.unpack_from(data, 0)
    if length < 1 or len(data) != 4 + length:
        raise Malformed(
            "frame length %d does not match %d bytes" % (length, len(data) - 4)
        )
    return mtype, data[5:]


# ---------------------------------------------------------------- transport


class Connection:
    """Frames over a connected stream socket.

    ``recv`` returns a memoryview into a buffer that is reused by the next
    ``recv``: decode it (or copy) before reading again. Reads are buffered,
    so a frame usually costs one ``recv_into`` (header and payload together).
    """

    def __init__(self, sock, max_frame: int = 1 << 32, bufsize: int = 1 << 16):
        self.sock = sock
        self.max_frame = max_frame
        self._buf = bytearray(max(bufsize, 8))
        self._mv = memoryview(self._buf)
        self._start = 0  # unread data is _buf[_start:_end]
        self._end = 0

    def _read(self, want, at_boundary=False) -> bool:
        """Read until _end - _start >= want; False on EOF before any byte."""
        start, end = self._start, self._end
        if start + want > len(self._buf):
            # Move the unread bytes to the front of a buffer that fits the frame.
            # The memoryview returned by the previous recv may still point at
            # the old buffer, so a larger one is a new bytearray.
            if want > len(self._buf):
                buf = bytearray(max(want, 2 * len(self._buf)))
                buf[: end - start] = self._mv[start:end]
                self._buf, self._mv = buf, memoryview(buf)
            else:
                self._mv[: end - start] = self._mv[start:end]
            end -= start
            start = 0
            self._start, self._end = start, end
        mv = self._mv
        cap = len(self._buf)
        recv_into = self.sock.recv_into
        first = end
        while end - start < want:
            k = recv_into(mv[end:cap])
            if k == 0:
                self._end = end
                if at_boundary and end == first and end == start:
                    return False
                raise Truncated(
                    "connection closed in the middle of a frame (%d of %d bytes)"
                    % (end - start, want)
                )
            end += k
        self._end = end
        return True

    def recv(self):
        """(type, payload memoryview), or (None, None) on a clean EOF."""
        if self._start == self._end:
            self._start = self._end = 0  # everything consumed: reuse from the front
        if self._end - self._start < 5 and not self._read(5, at_boundary=True):
            return None, None
        length, mtype = _FRAME_HEAD.unpack_from(self._buf, self._start)
        if length < 1:
            raise Malformed("frame length 0")
        if length > self.max_frame:
            raise TooLarge(
                "frame of %d bytes exceeds the limit of %d" % (length, self.max_frame)
            )
        total = 4 + length
        if self._end - self._start < total:
            self._read(total)
        start = self._start
        self._start = start + total
        return mtype, self._mv[start + 5 : start + total]

    def buffered_frame(self) -> bool:
        """Whether a whole frame is already read and waiting (no system call)."""
        n = self._end - self._start
        if n < 5:
            return False
        (length,) = _U32.unpack_from(self._buf, self._start)
        return n >= 4 + length

    def send_parts(self, parts):
        """Write the joined parts (whole frames) with one sendall."""
        self.sock.sendall(b"".join(parts))

    def send(self, mtype: int, payload=b""):
        self.sock.sendall(frame(mtype, payload))

    def send_json(self, mtype: int, obj):
        self.sock.sendall(json_frame(mtype, obj))

    def send_result(self, handler_nanos: int, results):
        # One sendall for the whole frame: a worker that dies mid-batch never
        # leaves a half-written RESULT behind a complete-looking header.
        self.send_parts(result_frame_parts(handler_nanos, results))

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
