package wire

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
)

func sampleRequests() []Request {
	return []Request{
		{ID: 1, ContentType: "application/json", Accept: "text/csv", Headers: []Header{{"A", "1"}}, Body: []byte("[1,2]")},
		{ID: 2, Body: pattern(inlineBody + 1)},
		{ID: 3, ContentType: "x", Body: []byte{}},
		{ID: 4, Body: pattern(3 * inlineBody)},
		{ID: 5, Accept: "y", Headers: []Header{{"B", ""}, {"B", "2"}}, Body: []byte("tail")},
	}
}

func TestInferRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		reqs []Request
	}{
		{"empty batch", nil},
		{"one small", sampleRequests()[:1]},
		{"large first", sampleRequests()[1:2]},
		{"mixed", sampleRequests()},
		{"large last", sampleRequests()[2:4]},
	}
	var enc InferEncoder
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := AppendInfer(nil, tt.reqs)
			if len(want) != InferSize(tt.reqs) {
				t.Fatalf("InferSize = %d, frame has %d bytes", InferSize(tt.reqs), len(want))
			}
			var got bytes.Buffer
			bufs := enc.Encode(tt.reqs)
			if _, err := bufs.WriteTo(&got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("InferEncoder output differs from AppendInfer (%d vs %d bytes)", got.Len(), len(want))
			}
			typ, p, err := NewReader(&got, len(want)).ReadFrame(nil)
			if err != nil || typ != TypeInfer {
				t.Fatalf("ReadFrame = %v, %v", typ, err)
			}
			reqs, err := DecodeInfer(p, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(reqs) != len(tt.reqs) {
				t.Fatalf("decoded %d requests, want %d", len(reqs), len(tt.reqs))
			}
			for i := range reqs {
				a, b := reqs[i], tt.reqs[i]
				if a.ID != b.ID || a.ContentType != b.ContentType || a.Accept != b.Accept ||
					!bytes.Equal(a.Body, b.Body) || !headersEqual(a.Headers, b.Headers) {
					t.Fatalf("request %d: got %+v, want %+v", i, a, b)
				}
			}
		})
	}
}

// EncodeEach writes one single-request INFER frame per request, each
// identical to the frame Encode makes for that request alone.
func TestInferEncodeEach(t *testing.T) {
	reqs := sampleRequests()
	var want []byte
	for i := range reqs {
		want = AppendInfer(want, reqs[i:i+1])
	}
	var enc InferEncoder
	enc.Encode(reqs) // leftover state must not leak into the next call
	var got bytes.Buffer
	bufs := enc.EncodeEach(reqs)
	if _, err := bufs.WriteTo(&got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("EncodeEach output differs from one AppendInfer per request (%d vs %d bytes)", got.Len(), len(want))
	}
	rd := NewReader(&got, len(want))
	for i := range reqs {
		p, err := rd.ReadFrameOf(TypeInfer, nil)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		dec, err := DecodeInfer(p, nil)
		if err != nil || len(dec) != 1 || dec[0].ID != reqs[i].ID || !bytes.Equal(dec[0].Body, reqs[i].Body) {
			t.Fatalf("frame %d: %+v, %v", i, dec, err)
		}
	}
}

func TestResultRoundTrip(t *testing.T) {
	res := &Result{HandlerNanos: 99, Responses: []Response{
		{ID: 1, Status: 200, ContentType: "application/json", Headers: []Header{{"X", "y"}}, Body: []byte("{}")},
		{ID: 2, Status: 503, ErrorType: "E", ErrorMessage: "m", Traceback: "tb"},
	}}
	frame := AppendResult(nil, res)
	if len(frame) != ResultSize(res) {
		t.Fatalf("ResultSize = %d, frame has %d bytes", ResultSize(res), len(frame))
	}
	p, err := NewReader(bytes.NewReader(frame), len(frame)).ReadFrameOf(TypeResult, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got Result
	if err := DecodeResult(p, &got); err != nil {
		t.Fatal(err)
	}
	got.Responses[1].Body = nil
	got.Responses[1].Headers = nil
	want := *res
	if !reflect.DeepEqual(got.Responses[0], want.Responses[0]) || got.HandlerNanos != 99 ||
		got.Responses[1].ErrorMessage != "m" || got.Responses[1].Status != 503 {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestReadFrame(t *testing.T) {
	ping := AppendFrame(nil, TypePing, nil)
	two := append(AppendFrame(nil, TypeHello, []byte("{}")), ping...)
	tests := []struct {
		name    string
		in      []byte
		max     int
		wantErr error
		want    []Type
	}{
		{"clean EOF", nil, 10, io.EOF, nil},
		{"two frames", two, 10, io.EOF, []Type{TypeHello, TypePing}},
		{"truncated header", ping[:2], 10, ErrTruncated, nil},
		{"truncated payload", AppendFrame(nil, TypeHello, []byte("abc"))[:7], 10, ErrTruncated, nil},
		{"oversize", AppendFrame(nil, TypeHello, make([]byte, 10)), 10, ErrFrameTooLarge, nil},
		{"exact max", AppendFrame(nil, TypeHello, make([]byte, 9)), 10, io.EOF, []Type{TypeHello}},
		{"zero length", []byte{0, 0, 0, 0, 1}, 10, ErrMalformed, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(bytes.NewReader(tt.in), tt.max)
			var got []Type
			buf := make([]byte, 0, 4)
			for {
				typ, _, err := r.ReadFrame(buf)
				if err != nil {
					if !errors.Is(err, tt.wantErr) {
						t.Fatalf("error %v, want %v", err, tt.wantErr)
					}
					break
				}
				got = append(got, typ)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("frames %v, want %v", got, tt.want)
			}
		})
	}
}

func TestReadFrameReusesBuffer(t *testing.T) {
	frame := AppendFrame(nil, TypeHello, []byte("abc"))
	buf := make([]byte, 0, 16)
	_, p, err := NewReader(bytes.NewReader(frame), 100).ReadFrame(buf)
	if err != nil {
		t.Fatal(err)
	}
	if &p[0] != &buf[:1][0] {
		t.Fatal("payload not read into the given buffer")
	}
}

func TestReadFrameOfWrongType(t *testing.T) {
	frame := AppendFrame(nil, TypePong, nil)
	_, err := NewReader(bytes.NewReader(frame), 100).ReadFrameOf(TypeResult, nil)
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v, want ErrMalformed", err)
	}
}

func TestDecodeTruncatedEverywhere(t *testing.T) {
	// Every strict prefix of a valid payload must fail cleanly.
	infer := AppendInfer(nil, sampleRequests()[:1])[HeaderSize:]
	for i := range infer {
		if _, err := DecodeInfer(infer[:i], nil); err == nil {
			t.Fatalf("INFER prefix of %d bytes decoded without error", i)
		}
	}
	result := AppendResult(nil, &Result{Responses: []Response{{ID: 1, Status: 200, Headers: []Header{{"a", "b"}}, Body: []byte("x")}}})[HeaderSize:]
	for i := range result {
		if err := DecodeResult(result[:i], &Result{}); err == nil {
			t.Fatalf("RESULT prefix of %d bytes decoded without error", i)
		}
	}
}

func BenchmarkInferEncode(b *testing.B) {
	reqs := []Request{{ID: 1, ContentType: "application/json", Accept: "application/json",
		Headers: []Header{{"Content-Type", "application/json"}}, Body: []byte("[[1,2,3,4]]")}}
	var enc InferEncoder
	b.ReportAllocs()
	for b.Loop() {
		_ = enc.Encode(reqs)
	}
}

func BenchmarkResultDecode(b *testing.B) {
	p := AppendResult(nil, &Result{Responses: []Response{{ID: 1, Status: 200, ContentType: "application/json", Body: []byte("[[0.5]]")}}})[HeaderSize:]
	var res Result
	b.ReportAllocs()
	for b.Loop() {
		if err := DecodeResult(p, &res); err != nil {
			b.Fatal(err)
		}
	}
}

// A pipeline stage's requests carry the original request after the body;
// Encode (large bodies as their own buffers) and AppendInfer agree, and
// DecodeInferWith reads it back.
func TestInferOriginalRoundTrip(t *testing.T) {
	big := pattern(2 * inlineBody)
	reqs := sampleRequests()
	for i := range reqs {
		o := &Original{ContentType: "text/csv", Accept: "application/json", Body: []byte("1,2")}
		if i%2 == 1 {
			o = &Original{Body: big} // large: a buffer of its own
		}
		reqs[i].Original = o
	}
	want := AppendInfer(nil, reqs)
	if len(want) != InferSize(reqs) {
		t.Fatalf("InferSize = %d, frame has %d bytes", InferSize(reqs), len(want))
	}
	for _, each := range []bool{false, true} {
		var enc InferEncoder
		var got bytes.Buffer
		bufs := enc.Encode(reqs)
		if each {
			bufs = enc.EncodeEach(reqs)
		}
		if _, err := bufs.WriteTo(&got); err != nil {
			t.Fatal(err)
		}
		if !each && !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("InferEncoder output differs from AppendInfer (%d vs %d bytes)", got.Len(), len(want))
		}
		rd := NewReader(&got, got.Len())
		var dec []Request
		for got.Len() > 0 {
			p, err := rd.ReadFrameOf(TypeInfer, nil)
			if err != nil {
				t.Fatal(err)
			}
			d, err := DecodeInferWith(p, nil, true)
			if err != nil {
				t.Fatal(err)
			}
			dec = append(dec, d...)
		}
		if len(dec) != len(reqs) {
			t.Fatalf("each=%v: decoded %d requests, want %d", each, len(dec), len(reqs))
		}
		for i := range dec {
			a, b := dec[i], reqs[i]
			if a.ID != b.ID || !bytes.Equal(a.Body, b.Body) || a.Original == nil ||
				a.Original.ContentType != b.Original.ContentType || a.Original.Accept != b.Original.Accept ||
				!bytes.Equal(a.Original.Body, b.Original.Body) {
				t.Fatalf("each=%v: request %d decoded as %+v", each, i, a)
			}
		}
	}
	// Without the LOAD flag the trailer is trailing bytes: an error.
	if _, err := DecodeInfer(want[HeaderSize:], nil); !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTruncated) {
		t.Fatalf("DecodeInfer of a frame with originals: %v", err)
	}
}
