"""Fuzzing the default decoders and the content negotiation.

Request bodies come from clients: whatever bytes arrive, the default
input_fn must either decode them into a tensor or refuse them with a client
error (400 BadInput, 415 UnsupportedContentType). Anything else would be a
500 that blames the model for a bad request. Mutations of valid bodies of
every supported type, seeded so that a failure can be replayed: the seed
and the body are in the assertion message.
"""

import io
import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sagebox_runtime import content_types as ct  # noqa: E402
from sagebox_runtime import defaults as d  # noqa: E402
from sagebox_runtime.errors import BadInput, UnsupportedAccept, UnsupportedContentType  # noqa: E402

ROUNDS = 1000  # per content type; well under a second each


def _npy(arr):
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _npz(**arrays):
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


SEEDS = {
    ct.JSON: [
        b"[[1.0, 2.0, 3.0, 4.0], [5, 6, 7, 8]]",
        b"[1, 2, 3]",
        b"[[[1, 2], [3, 4]], [[5, 6], [7, 8]]]",
        b"[-1e-3, 2.5E10, 0, true]",
    ],
    ct.CSV: [b"1,2,3,4\n5,6,7,8\n", b"1.5\n2.5\n", b"-1e3,nan,inf\r\n4,5,6"],
    ct.NPY: [
        _npy(np.arange(12, dtype=np.float32).reshape(3, 4)),
        _npy(np.array([1, 2, 3], dtype=np.int64)),
        _npy(np.array([[True, False]])),
        _npy(np.asfortranarray(np.ones((2, 3), dtype=np.float64))),
    ],
    "application/x-npz": [
        _npz(x=np.arange(6, dtype=np.float32).reshape(2, 3)),
        _npz(a=np.array([1, 2], dtype=np.int32)),
    ],
}


def _mutate(rng, body):
    b = bytearray(body)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        i = rng.randrange(len(b) + 1)
        if op == 0 and b:  # flip a byte
            b[min(i, len(b) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1:  # cut
            del b[i:]
        elif op == 2:  # insert random bytes
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op == 3:  # insert a token that means something to a parser
            b[i:i] = rng.choice([b"[", b"]", b",", b"\n", b'"', b"{", b"-", b"e", b"nan", b"\x00", b"'", b"(", b")"])
        elif op == 4 and b:  # duplicate a slice
            j = rng.randrange(len(b))
            b[i:i] = b[j : j + rng.randint(1, 16)]
        elif op == 5 and b:  # drop a slice
            del b[i : i + rng.randint(1, 16)]
    return bytes(b)


@pytest.mark.parametrize("content_type", sorted(SEEDS))
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # 1e300 -> inf in float32
def test_mutated_bodies_decode_or_are_client_errors(content_type):
    rng = random.Random(content_type)
    for n in range(ROUNDS):
        body = _mutate(rng, rng.choice(SEEDS[content_type]))
        try:
            out = d.decode_tensor(body, content_type)
        except (BadInput, UnsupportedContentType):
            continue
        except Exception as e:  # pragma: no cover - this is the failure
            pytest.fail("round %d: %s body %r raised %s: %s" % (n, content_type, body[:200], type(e).__name__, e))
        assert isinstance(out, torch.Tensor), (n, body[:200], out)


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,  # deeper than Python's recursion limit
        b"[" * 5_000 + b"1" + b"]" * 5_000,
        b"[" * 100_000,
        b"[" * 900 + b"1" + b"]" * 900,  # parses, but has more dimensions than numpy allows
        b"[" + b"9" * 5_000 + b"]",  # past int()'s digit limit
    ],
    ids=["deep", "deep-closed", "deep-unclosed", "too-many-dims", "long-int"],
)
def test_hostile_json_is_a_400(body):
    with pytest.raises(BadInput):
        d.decode_tensor(body, ct.JSON)


def test_random_accept_headers_negotiate_or_refuse():
    rng = random.Random("accept")
    parts = ["application/json", "text/csv", "application/x-npy", "*/*", "text/*", "*", "a/b", ";q=", "0.5", "abc",
             ",", ";", " ", "=", "q=0", "charset=utf-8", "\t", "é", "/", ""]
    for n in range(2_000):
        accept = "".join(rng.choice(parts) for _ in range(rng.randint(0, 8)))
        try:
            got = ct.negotiate(accept, ct.ENCODABLE, ct.JSON)
        except UnsupportedAccept:
            continue
        assert got is None or got in ct.ENCODABLE, (n, accept, got)
        ct.concrete(accept, ct.JSON)  # must not raise either
