package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Version is the protocol version this package speaks; HELLO carries it.
const Version = 1

// HeaderSize is the number of bytes in front of every payload: the u32 length
// and the type byte.
const HeaderSize = 5

// Type identifies a message.
type Type uint8

// Message types, as listed in the package documentation.
const (
	TypeHello  Type = 0x01
	TypeLoad   Type = 0x02
	TypeLoaded Type = 0x03
	TypeInfer  Type = 0x04
	TypeResult Type = 0x05
	TypePing   Type = 0x06
	TypePong   Type = 0x07
)

// String returns the message name, e.g. "INFER".
func (t Type) String() string {
	switch t {
	case TypeHello:
		return "HELLO"
	case TypeLoad:
		return "LOAD"
	case TypeLoaded:
		return "LOADED"
	case TypeInfer:
		return "INFER"
	case TypeResult:
		return "RESULT"
	case TypePing:
		return "PING"
	case TypePong:
		return "PONG"
	}
	return fmt.Sprintf("type(0x%02x)", uint8(t))
}

// Errors returned by the decoder. They are wrapped with context; test with
// errors.Is.
var (
	// ErrFrameTooLarge means a frame's length prefix exceeds the maximum.
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrTruncated means a frame or a field ended early.
	ErrTruncated = errors.New("truncated frame")
	// ErrMalformed means a frame's contents do not follow the protocol.
	ErrMalformed = errors.New("malformed frame")
)

// AppendFrame appends a complete frame (length prefix, type, payload) to dst.
func AppendFrame(dst []byte, t Type, payload []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)+1))
	dst = append(dst, byte(t))
	return append(dst, payload...)
}

// Reader reads frames from a stream and enforces a maximum frame size.
type Reader struct {
	r   io.Reader
	max int
	hdr [HeaderSize]byte
}

// NewReader returns a Reader on r that rejects frames whose length prefix
// (type byte + payload) exceeds maxFrame bytes.
func NewReader(r io.Reader, maxFrame int) *Reader {
	return &Reader{r: r, max: maxFrame}
}

// ReadFrame reads one frame. The payload is read into buf when it has the
// capacity, otherwise into a newly allocated slice; the returned payload
// aliases that memory. A clean end of stream before a frame starts returns
// io.EOF; a stream that ends inside a frame returns an error wrapping
// ErrTruncated (and io.ErrUnexpectedEOF).
func (r *Reader) ReadFrame(buf []byte) (Type, []byte, error) {
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, fmt.Errorf("read frame header: %w: %w", ErrTruncated, err)
		}
		return 0, nil, err
	}
	n := int64(binary.BigEndian.Uint32(r.hdr[:4]))
	t := Type(r.hdr[4])
	if n < 1 {
		return 0, nil, fmt.Errorf("read frame header: %w: zero length", ErrMalformed)
	}
	if n > int64(r.max) {
		return t, nil, fmt.Errorf("read %s frame: %w: %d bytes, limit %d", t, ErrFrameTooLarge, n, r.max)
	}
	size := int(n - 1)
	if cap(buf) >= size {
		buf = buf[:size]
	} else {
		buf = make([]byte, size)
	}
	if _, err := io.ReadFull(r.r, buf); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return t, nil, fmt.Errorf("read %s payload: %w: %w", t, ErrTruncated, io.ErrUnexpectedEOF)
		}
		return t, nil, fmt.Errorf("read %s payload: %w", t, err)
	}
	return t, buf, nil
}

// ReadFrameOf reads one frame into buf like ReadFrame and checks that its type
// is want.
func (r *Reader) ReadFrameOf(want Type, buf []byte) ([]byte, error) {
	t, p, err := r.ReadFrame(buf)
	if err != nil {
		return nil, err
	}
	if t != want {
		return nil, fmt.Errorf("%w: got %s, want %s", ErrMalformed, t, want)
	}
	return p, nil
}
