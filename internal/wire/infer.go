package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"net"
)

// Header is one HTTP header line. A header with several values travels as
// several Header entries with the same name.
type Header struct {
	Name  string
	Value string
}

// Request is one element of an INFER batch.
type Request struct {
	ID          uint64
	ContentType string
	Accept      string
	Headers     []Header
	Body        []byte
	// Original is the request the model server received, for a stage
	// after the first of a serial inference pipeline (LOAD's
	// "original_request"); nil otherwise. Encoders append it to the
	// element when it is set, so every request to a worker whose LOAD
	// asked for it must carry one.
	Original *Original
}

// Original is the request a serial pipeline's first container received,
// as later stages see it (context.original_request in Python).
type Original struct {
	ContentType string
	Accept      string
	Body        []byte
}

// Response is one element of a RESULT.
type Response struct {
	ID           uint64
	Status       uint16
	ContentType  string
	Headers      []Header
	Body         []byte
	ErrorType    string
	ErrorMessage string
	Traceback    string
}

// Result is the payload of RESULT.
type Result struct {
	// HandlerNanos is the time the worker spent in handler code.
	HandlerNanos uint64
	Responses    []Response
}

// Minimum encoded sizes of one batch element, used to bound counts before
// allocating.
const (
	minRequestSize  = 8 + 4 + 4 + 4 + 4
	minResponseSize = 8 + 2 + 4 + 4 + 4 + 4 + 4 + 4
)

// inlineBody is the body size up to which InferEncoder copies a body into
// its scratch buffer rather than giving it its own iovec.
const inlineBody = 16 << 10

func appendStr(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

func appendHeaders(dst []byte, hs []Header) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(hs)))
	for _, h := range hs {
		dst = appendStr(dst, h.Name)
		dst = appendStr(dst, h.Value)
	}
	return dst
}

// appendRequestMeta appends everything of r up to and including the body's
// length prefix.
func appendRequestMeta(dst []byte, r *Request) []byte {
	dst = binary.BigEndian.AppendUint64(dst, r.ID)
	dst = appendStr(dst, r.ContentType)
	dst = appendStr(dst, r.Accept)
	dst = appendHeaders(dst, r.Headers)
	return binary.BigEndian.AppendUint32(dst, uint32(len(r.Body)))
}

// appendOriginalMeta appends the original request's trailer of an INFER
// element up to and including its body's length prefix.
func appendOriginalMeta(dst []byte, o *Original) []byte {
	dst = appendStr(dst, o.ContentType)
	dst = appendStr(dst, o.Accept)
	return binary.BigEndian.AppendUint32(dst, uint32(len(o.Body)))
}

// InferSize returns the length of the INFER frame for reqs, header included.
func InferSize(reqs []Request) int {
	n := HeaderSize + 4
	for i := range reqs {
		r := &reqs[i]
		n += 8 + 4 + len(r.ContentType) + 4 + len(r.Accept) + 4 + 4 + len(r.Body)
		for _, h := range r.Headers {
			n += 8 + len(h.Name) + len(h.Value)
		}
		if o := r.Original; o != nil {
			n += 4 + len(o.ContentType) + 4 + len(o.Accept) + 4 + len(o.Body)
		}
	}
	return n
}

// AppendInfer appends the complete INFER frame for reqs to dst.
func AppendInfer(dst []byte, reqs []Request) []byte {
	dst = appendInferHead(dst, reqs)
	for i := range reqs {
		dst = appendRequestMeta(dst, &reqs[i])
		dst = append(dst, reqs[i].Body...)
		if o := reqs[i].Original; o != nil {
			dst = appendOriginalMeta(dst, o)
			dst = append(dst, o.Body...)
		}
	}
	return dst
}

// appendInferHead appends the frame header and request count of the INFER
// frame for reqs.
func appendInferHead(dst []byte, reqs []Request) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(InferSize(reqs)-4))
	dst = append(dst, byte(TypeInfer))
	return binary.BigEndian.AppendUint32(dst, uint32(len(reqs)))
}

// InferEncoder builds INFER frames as a list of buffers for one vectored
// write, so that large bodies are not copied. The zero value is ready to
// use; reusing an encoder reuses its memory.
type InferEncoder struct {
	scratch []byte
	cuts    []cut // large bodies, in order
	bufs    net.Buffers
}

// cut is a large body inserted after scratch offset off.
type cut struct {
	off  int
	body []byte
}

// Encode returns the INFER frame for reqs. The buffers alias the encoder's
// scratch memory and the request bodies; they stay valid until the next call.
// Writing them with (*net.Buffers).WriteTo consumes the returned value, not
// the encoder's state.
func (e *InferEncoder) Encode(reqs []Request) net.Buffers { return e.encode(reqs, false) }

// EncodeEach returns one INFER frame per request (batches of one), back to
// back, for one vectored write; validity as for Encode.
func (e *InferEncoder) EncodeEach(reqs []Request) net.Buffers { return e.encode(reqs, true) }

func (e *InferEncoder) encode(reqs []Request, each bool) net.Buffers {
	s := e.scratch[:0]
	e.cuts = e.cuts[:0]
	if !each {
		s = appendInferHead(s, reqs)
	}
	for i := range reqs {
		r := &reqs[i]
		if each {
			s = appendInferHead(s, reqs[i:i+1])
		}
		s = appendRequestMeta(s, r)
		s = e.body(s, r.Body)
		if o := r.Original; o != nil {
			s = appendOriginalMeta(s, o)
			s = e.body(s, o.Body)
		}
	}
	e.scratch = s
	bufs := e.bufs[:0]
	prev := 0
	for _, c := range e.cuts {
		bufs = append(bufs, s[prev:c.off], c.body)
		prev = c.off
	}
	clear(e.cuts) // do not keep the bodies alive
	if prev < len(s) {
		bufs = append(bufs, s[prev:])
	}
	e.bufs = bufs
	return bufs
}

// body appends b to s, or records it as a cut when it is large.
func (e *InferEncoder) body(s, b []byte) []byte {
	if len(b) > inlineBody {
		e.cuts = append(e.cuts, cut{off: len(s), body: b})
		return s
	}
	return append(s, b...)
}

// decoder reads big-endian fields from a payload without copying byte
// fields.
type decoder struct {
	p    []byte
	off  int
	err  error
	what Type
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("decode %s at byte %d: %w: %s", d.what, d.off, ErrTruncated, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) need(n int) bool {
	if d.err != nil {
		return false
	}
	if n < 0 || len(d.p)-d.off < n {
		d.fail("need %d bytes, have %d", n, len(d.p)-d.off)
		return false
	}
	return true
}

func (d *decoder) u16() uint16 {
	if !d.need(2) {
		return 0
	}
	v := binary.BigEndian.Uint16(d.p[d.off:])
	d.off += 2
	return v
}

func (d *decoder) u32() uint32 {
	if !d.need(4) {
		return 0
	}
	v := binary.BigEndian.Uint32(d.p[d.off:])
	d.off += 4
	return v
}

func (d *decoder) u64() uint64 {
	if !d.need(8) {
		return 0
	}
	v := binary.BigEndian.Uint64(d.p[d.off:])
	d.off += 8
	return v
}

func (d *decoder) bytes() []byte {
	n := d.u32()
	if n > math.MaxInt32 || !d.need(int(n)) {
		d.fail("field of %d bytes", n)
		return nil
	}
	b := d.p[d.off : d.off+int(n) : d.off+int(n)]
	d.off += int(n)
	return b
}

func (d *decoder) str() string {
	return string(d.bytes())
}

// count reads a u32 element count and checks that the rest of the payload
// can hold that many elements of at least min bytes each.
func (d *decoder) count(min int) int {
	n := d.u32()
	if d.err != nil {
		return 0
	}
	if uint64(n)*uint64(min) > uint64(len(d.p)-d.off) {
		d.fail("count %d does not fit in %d bytes", n, len(d.p)-d.off)
		return 0
	}
	return int(n)
}

func (d *decoder) headers(hs []Header) []Header {
	n := d.count(8)
	hs = hs[:0]
	for i := 0; i < n && d.err == nil; i++ {
		name := d.str()
		value := d.str()
		hs = append(hs, Header{Name: name, Value: value})
	}
	return hs
}

func (d *decoder) end() error {
	if d.err == nil && d.off != len(d.p) {
		d.err = fmt.Errorf("decode %s: %w: %d trailing bytes", d.what, ErrMalformed, len(d.p)-d.off)
	}
	return d.err
}

// DecodeInfer decodes an INFER payload, reusing reqs' backing array. Bodies
// alias p; strings are copied.
func DecodeInfer(p []byte, reqs []Request) ([]Request, error) {
	return DecodeInferWith(p, reqs, false)
}

// DecodeInferWith is DecodeInfer for a worker whose LOAD said whether
// every element carries the original request (LOAD's "original_request").
func DecodeInferWith(p []byte, reqs []Request, original bool) ([]Request, error) {
	d := decoder{p: p, what: TypeInfer}
	n := d.count(minRequestSize)
	reqs = reqs[:0]
	for i := 0; i < n && d.err == nil; i++ {
		var r Request
		r.ID = d.u64()
		r.ContentType = d.str()
		r.Accept = d.str()
		r.Headers = d.headers(nil)
		r.Body = d.bytes()
		if original {
			var o Original
			o.ContentType = d.str()
			o.Accept = d.str()
			o.Body = d.bytes()
			r.Original = &o
		}
		reqs = append(reqs, r)
	}
	if err := d.end(); err != nil {
		return reqs[:0], err
	}
	return reqs, nil
}

// ResultSize returns the length of the RESULT frame for res, header included.
func ResultSize(res *Result) int {
	n := HeaderSize + 8 + 4
	for i := range res.Responses {
		r := &res.Responses[i]
		n += minResponseSize + len(r.ContentType) + len(r.Body) +
			len(r.ErrorType) + len(r.ErrorMessage) + len(r.Traceback)
		for _, h := range r.Headers {
			n += 8 + len(h.Name) + len(h.Value)
		}
	}
	return n
}

// AppendResult appends the complete RESULT frame for res to dst.
func AppendResult(dst []byte, res *Result) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(ResultSize(res)-4))
	dst = append(dst, byte(TypeResult))
	dst = binary.BigEndian.AppendUint64(dst, res.HandlerNanos)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(res.Responses)))
	for i := range res.Responses {
		r := &res.Responses[i]
		dst = binary.BigEndian.AppendUint64(dst, r.ID)
		dst = binary.BigEndian.AppendUint16(dst, r.Status)
		dst = appendStr(dst, r.ContentType)
		dst = appendHeaders(dst, r.Headers)
		dst = appendBytes(dst, r.Body)
		dst = appendStr(dst, r.ErrorType)
		dst = appendStr(dst, r.ErrorMessage)
		dst = appendStr(dst, r.Traceback)
	}
	return dst
}

// DecodeResult decodes a RESULT payload into res, reusing its Responses
// backing array. Bodies alias p; strings are copied.
func DecodeResult(p []byte, res *Result) error {
	d := decoder{p: p, what: TypeResult}
	res.HandlerNanos = d.u64()
	n := d.count(minResponseSize)
	rs := res.Responses[:0]
	for i := 0; i < n && d.err == nil; i++ {
		var r Response
		r.ID = d.u64()
		r.Status = d.u16()
		r.ContentType = d.str()
		r.Headers = d.headers(nil)
		r.Body = d.bytes()
		r.ErrorType = d.str()
		r.ErrorMessage = d.str()
		r.Traceback = d.str()
		rs = append(rs, r)
	}
	res.Responses = rs
	if err := d.end(); err != nil {
		res.Responses = rs[:0]
		return err
	}
	return nil
}
