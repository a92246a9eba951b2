package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata golden vectors")

// The golden vectors are shared with the Python worker's tests
// (python/tests), which read testdata/vectors.json and the .bin files. See
// testdata/README.md.

type goldenHeader [2]string

type goldenRequest struct {
	ID          uint64         `json:"id"`
	ContentType string         `json:"content_type"`
	Accept      string         `json:"accept"`
	Headers     []goldenHeader `json:"headers"`
	BodyB64     string         `json:"body_b64"`
	// Original is the original request a pipeline stage's INFER carries
	// (LOAD's original_request); absent otherwise.
	Original *goldenOriginal `json:"original,omitempty"`
}

type goldenOriginal struct {
	ContentType string `json:"content_type"`
	Accept      string `json:"accept"`
	BodyB64     string `json:"body_b64"`
}

type goldenResponse struct {
	ID           uint64         `json:"id"`
	Status       uint16         `json:"status"`
	ContentType  string         `json:"content_type"`
	Headers      []goldenHeader `json:"headers"`
	BodyB64      string         `json:"body_b64"`
	ErrorType    string         `json:"error_type"`
	ErrorMessage string         `json:"error_message"`
	Traceback    string         `json:"traceback"`
}

type goldenVector struct {
	Name         string           `json:"name"`
	File         string           `json:"file"`
	Type         string           `json:"type"`
	TypeCode     uint8            `json:"type_code"`
	Description  string           `json:"description"`
	JSON         json.RawMessage  `json:"json,omitempty"`
	Requests     []goldenRequest  `json:"requests,omitempty"`
	HandlerNanos *uint64          `json:"handler_nanos,omitempty"`
	Responses    []goldenResponse `json:"responses,omitempty"`
}

type goldenInvalid struct {
	Name        string `json:"name"`
	File        string `json:"file"`
	Description string `json:"description"`
	MaxFrame    int    `json:"max_frame"`
	Error       string `json:"error"`
}

type goldenFile struct {
	Version     int             `json:"version"`
	Description string          `json:"description"`
	Vectors     []goldenVector  `json:"vectors"`
	Invalid     []goldenInvalid `json:"invalid"`
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

func toGoldenHeaders(hs []Header) []goldenHeader {
	out := []goldenHeader{}
	for _, h := range hs {
		out = append(out, goldenHeader{h.Name, h.Value})
	}
	return out
}

func fromGoldenHeaders(hs []goldenHeader) []Header {
	var out []Header
	for _, h := range hs {
		out = append(out, Header{Name: h[0], Value: h[1]})
	}
	return out
}

// goldenCase is a valid message together with its encoding.
type goldenCase struct {
	vec   goldenVector
	frame []byte
}

func jsonCase(t *testing.T, name, desc string, typ Type, v any) goldenCase {
	t.Helper()
	frame, err := AppendJSON(nil, typ, v)
	if err != nil {
		t.Fatal(err)
	}
	return goldenCase{
		vec:   goldenVector{Name: name, File: name + ".bin", Type: typ.String(), TypeCode: uint8(typ), Description: desc, JSON: frame[HeaderSize:]},
		frame: frame,
	}
}

func inferCase(name, desc string, reqs []Request) goldenCase {
	var gr []goldenRequest
	for _, r := range reqs {
		gr = append(gr, goldenRequest{ID: r.ID, ContentType: r.ContentType, Accept: r.Accept,
			Headers: toGoldenHeaders(r.Headers), BodyB64: base64.StdEncoding.EncodeToString(r.Body)})
		if o := r.Original; o != nil {
			gr[len(gr)-1].Original = &goldenOriginal{ContentType: o.ContentType, Accept: o.Accept,
				BodyB64: base64.StdEncoding.EncodeToString(o.Body)}
		}
	}
	if gr == nil {
		gr = []goldenRequest{}
	}
	return goldenCase{
		vec:   goldenVector{Name: name, File: name + ".bin", Type: "INFER", TypeCode: uint8(TypeInfer), Description: desc, Requests: gr},
		frame: AppendInfer(nil, reqs),
	}
}

func resultCase(name, desc string, res *Result) goldenCase {
	var gr []goldenResponse
	for _, r := range res.Responses {
		gr = append(gr, goldenResponse{ID: r.ID, Status: r.Status, ContentType: r.ContentType,
			Headers: toGoldenHeaders(r.Headers), BodyB64: base64.StdEncoding.EncodeToString(r.Body),
			ErrorType: r.ErrorType, ErrorMessage: r.ErrorMessage, Traceback: r.Traceback})
	}
	hn := res.HandlerNanos
	return goldenCase{
		vec: goldenVector{Name: name, File: name + ".bin", Type: "RESULT", TypeCode: uint8(TypeResult), Description: desc,
			HandlerNanos: &hn, Responses: gr},
		frame: AppendResult(nil, res),
	}
}

func goldenCases(t *testing.T) []goldenCase {
	t.Helper()
	return []goldenCase{
		jsonCase(t, "hello", "worker greeting", TypeHello, Hello{Version: 1, PID: 4242, Python: "3.11.2"}),
		jsonCase(t, "load", "load request for worker 3 on GPU 1", TypeLoad, Load{
			ModelDir: "/opt/ml/model", Program: "inference.py", GPUID: 1, BatchSize: 8, WorkerID: 3, Workers: 4,
			ServerName: "sagebox", ServerVersion: "0.1.0", DefaultAccept: "application/json"}),
		jsonCase(t, "loaded_ok", "model loaded by a batch-aware handler", TypeLoaded, Loaded{OK: true, BatchAware: true}),
		jsonCase(t, "loaded_error", "model_fn raised", TypeLoaded, Loaded{OK: false, Error: &ErrorInfo{
			Type: "FileNotFoundError", Message: "model.pt not found in /opt/ml/model",
			Traceback: "Traceback (most recent call last):\n  File \"inference.py\", line 3, in model_fn\nFileNotFoundError: model.pt not found in /opt/ml/model\n"}}),
		{vec: goldenVector{Name: "ping", File: "ping.bin", Type: "PING", TypeCode: uint8(TypePing), Description: "liveness probe, empty payload"},
			frame: AppendFrame(nil, TypePing, nil)},
		{vec: goldenVector{Name: "pong", File: "pong.bin", Type: "PONG", TypeCode: uint8(TypePong), Description: "liveness answer, empty payload"},
			frame: AppendFrame(nil, TypePong, nil)},
		inferCase("infer_single", "one JSON request with two headers", []Request{{
			ID: 1, ContentType: "application/json", Accept: "application/json",
			Headers: []Header{{"Content-Type", "application/json"}, {"X-Amzn-Sagemaker-Custom-Attributes", "trace=abc"}},
			Body:    []byte(`[[1.0, 2.0, 3.0]]`)}}),
		inferCase("infer_batch", "three requests: CSV with charset, empty body and no headers, binary NPY-like body with non-ASCII header value",
			[]Request{
				{ID: 7, ContentType: "text/csv; charset=utf-8", Accept: "*/*", Headers: []Header{{"Accept", "*/*"}}, Body: []byte("1,2,3\n4,5,6\n")},
				{ID: 8, ContentType: "", Accept: "", Headers: nil, Body: nil},
				{ID: 1<<63 + 5, ContentType: "application/x-npy", Accept: "application/x-npy",
					Headers: []Header{{"X-Name", "grüße ✓"}, {"X-Multi", "a"}, {"X-Multi", "b"}},
					Body:    []byte{0x93, 'N', 'U', 'M', 'P', 'Y', 0x00, 0xff, 0x80}},
			}),
		inferCase("infer_large_body", "one request whose 20000-byte body is bytes(i % 251 for i in range(20000))",
			[]Request{{ID: 2, ContentType: "application/octet-stream", Accept: "application/json", Body: pattern(20000)}}),
		inferCase("infer_empty", "a batch of zero requests (never sent by the front end, but valid framing)", nil),
		inferCase("infer_original", "a serial pipeline's later stage (LOAD original_request): each request carries the client's request after its body",
			[]Request{
				{ID: 3, ContentType: "application/json", Headers: []Header{{"X-Amzn-Sagemaker-Custom-Attributes", "k=v"}}, Body: []byte(`{"doubled": [2.0]}`),
					Original: &Original{ContentType: "text/csv", Accept: "text/csv", Body: []byte("1")}},
				{ID: 4, ContentType: "", Body: nil, Original: &Original{Body: pattern(300)}},
			}),
		resultCase("result_batch", "answers for infer_batch: success with a custom header, a 415, and a 500 with traceback", &Result{
			HandlerNanos: 1234567,
			Responses: []Response{
				{ID: 7, Status: 200, ContentType: "application/json",
					Headers: []Header{{"X-Amzn-SageMaker-Custom-Attributes", "ok"}}, Body: []byte(`[[0.5], [0.25]]`)},
				{ID: 8, Status: 415, ErrorType: "UnsupportedMediaType",
					ErrorMessage: "content type '' is not supported by the default input_fn; supported: application/json, text/csv, application/x-npy"},
				{ID: 1<<63 + 5, Status: 500, ErrorType: "RuntimeError", ErrorMessage: "shape mismatch ✗",
					Traceback: "Traceback (most recent call last):\n  File \"inference.py\", line 9, in predict_fn\nRuntimeError: shape mismatch ✗\n"},
			}}),
		resultCase("result_single", "a single successful CSV answer without headers", &Result{
			HandlerNanos: 0,
			Responses:    []Response{{ID: 1, Status: 200, ContentType: "text/csv", Body: []byte("0.1,0.2\n")}}}),
	}
}

type invalidCase struct {
	inv   goldenInvalid
	frame []byte
}

func invalidCases() []invalidCase {
	infer := AppendInfer(nil, []Request{{ID: 1, ContentType: "application/json", Accept: "application/json", Body: []byte("[1]")}})
	result := AppendResult(nil, &Result{Responses: []Response{{ID: 1, Status: 200, Body: []byte("ok")}}})

	// A frame whose length prefix is shorter than its INFER contents
	// claim: the body length field says 100 but 3 bytes follow.
	lying := append([]byte(nil), infer...)
	bodyLenAt := len(lying) - 3 - 4
	lying[bodyLenAt+3] = 100

	trailing := AppendFrame(nil, TypeInfer, append(append([]byte(nil), infer[HeaderSize:]...), 0xAA))

	// count claims 2^32-1 elements in a tiny payload.
	hugeCount := AppendFrame(nil, TypeInfer, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})

	return []invalidCase{
		{goldenInvalid{Name: "truncated_header", Description: "three bytes of a length prefix", MaxFrame: 1 << 20, Error: "truncated"}, infer[:3]},
		{goldenInvalid{Name: "truncated_payload", Description: "an INFER frame cut 2 bytes short", MaxFrame: 1 << 20, Error: "truncated"}, infer[:len(infer)-2]},
		{goldenInvalid{Name: "zero_length", Description: "length prefix 0 (a frame must hold at least its type byte), followed by one byte", MaxFrame: 1 << 20, Error: "malformed"}, []byte{0, 0, 0, 0, 1}},
		{goldenInvalid{Name: "oversize", Description: "a RESULT frame of " + itoa(len(result)-4) + " bytes read with max_frame 16", MaxFrame: 16, Error: "too_large"}, result},
		{goldenInvalid{Name: "infer_bad_body_length", Description: "INFER whose body length field exceeds the frame", MaxFrame: 1 << 20, Error: "truncated"}, lying},
		{goldenInvalid{Name: "infer_trailing_bytes", Description: "INFER with one byte after the last request", MaxFrame: 1 << 20, Error: "malformed"}, trailing},
		{goldenInvalid{Name: "infer_huge_count", Description: "INFER claiming 4294967295 requests in 8 bytes", MaxFrame: 1 << 20, Error: "truncated"}, hugeCount},
		{goldenInvalid{Name: "result_truncated_field", Description: "RESULT frame whose payload ends inside the traceback length", MaxFrame: 1 << 20, Error: "truncated"},
			AppendFrame(nil, TypeResult, result[HeaderSize:len(result)-2])},
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestGolden(t *testing.T) {
	cases := goldenCases(t)
	invalid := invalidCases()
	if *update {
		gf := goldenFile{Version: Version, Description: "wire protocol vectors; see README.md"}
		for _, c := range cases {
			gf.Vectors = append(gf.Vectors, c.vec)
			if err := os.WriteFile(filepath.Join("testdata", c.vec.File), c.frame, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range invalid {
			c.inv.File = c.inv.Name + ".bin"
			gf.Invalid = append(gf.Invalid, c.inv)
			if err := os.WriteFile(filepath.Join("testdata", c.inv.File), c.frame, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		b, err := json.MarshalIndent(gf, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata", "vectors.json"), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	raw, err := os.ReadFile(filepath.Join("testdata", "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var gf goldenFile
	if err := json.Unmarshal(raw, &gf); err != nil {
		t.Fatal(err)
	}
	if len(gf.Vectors) != len(cases) || len(gf.Invalid) != len(invalid) {
		t.Fatalf("vectors.json is stale: run go test ./internal/wire -run TestGolden -update")
	}

	for i, c := range cases {
		t.Run(c.vec.Name, func(t *testing.T) {
			got, err := os.ReadFile(filepath.Join("testdata", c.vec.File))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, c.frame) {
				t.Fatalf("encoding differs from %s:\n got %x\nwant %x", c.vec.File, c.frame, got)
			}
			v := gf.Vectors[i]
			typ, payload, err := NewReader(bytes.NewReader(got), 1<<20).ReadFrame(nil)
			if err != nil {
				t.Fatal(err)
			}
			if uint8(typ) != v.TypeCode || typ.String() != v.Type {
				t.Fatalf("type %s, vectors.json says %s/%d", typ, v.Type, v.TypeCode)
			}
			switch typ {
			case TypeInfer:
				original := len(v.Requests) > 0 && v.Requests[0].Original != nil
				reqs, err := DecodeInferWith(payload, nil, original)
				if err != nil {
					t.Fatal(err)
				}
				if len(reqs) != len(v.Requests) {
					t.Fatalf("got %d requests, want %d", len(reqs), len(v.Requests))
				}
				for j, r := range reqs {
					want := v.Requests[j]
					body, _ := base64.StdEncoding.DecodeString(want.BodyB64)
					if r.ID != want.ID || r.ContentType != want.ContentType || r.Accept != want.Accept ||
						!bytes.Equal(r.Body, body) || !headersEqual(r.Headers, fromGoldenHeaders(want.Headers)) {
						t.Fatalf("request %d = %+v, want %+v", j, r, want)
					}
					if o := want.Original; o != nil {
						ob, _ := base64.StdEncoding.DecodeString(o.BodyB64)
						if r.Original == nil || r.Original.ContentType != o.ContentType || r.Original.Accept != o.Accept || !bytes.Equal(r.Original.Body, ob) {
							t.Fatalf("request %d original = %+v, want %+v", j, r.Original, o)
						}
					}
				}
			case TypeResult:
				var res Result
				if err := DecodeResult(payload, &res); err != nil {
					t.Fatal(err)
				}
				if res.HandlerNanos != *v.HandlerNanos || len(res.Responses) != len(v.Responses) {
					t.Fatalf("result = %+v, want %+v", res, v)
				}
				for j, r := range res.Responses {
					want := v.Responses[j]
					body, _ := base64.StdEncoding.DecodeString(want.BodyB64)
					if r.ID != want.ID || r.Status != want.Status || r.ContentType != want.ContentType ||
						!bytes.Equal(r.Body, body) || !headersEqual(r.Headers, fromGoldenHeaders(want.Headers)) ||
						r.ErrorType != want.ErrorType || r.ErrorMessage != want.ErrorMessage || r.Traceback != want.Traceback {
						t.Fatalf("response %d = %+v, want %+v", j, r, want)
					}
				}
			case TypeHello, TypeLoad, TypeLoaded:
				var a, b any
				if err := json.Unmarshal(payload, &a); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(v.JSON, &b); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(a, b) {
					t.Fatalf("JSON payload %v, want %v", a, b)
				}
			}
		})
	}

	for i, c := range invalid {
		t.Run("invalid/"+c.inv.Name, func(t *testing.T) {
			inv := gf.Invalid[i]
			got, err := os.ReadFile(filepath.Join("testdata", inv.File))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, c.frame) {
				t.Fatalf("%s is stale", inv.File)
			}
			err = decodeAny(got, inv.MaxFrame)
			want := map[string]error{"truncated": ErrTruncated, "malformed": ErrMalformed, "too_large": ErrFrameTooLarge}[inv.Error]
			if !errors.Is(err, want) {
				t.Fatalf("decode error = %v, want %v", err, want)
			}
		})
	}
}

// decodeAny reads one frame from b and decodes its payload by type.
func decodeAny(b []byte, maxFrame int) error {
	typ, payload, err := NewReader(bytes.NewReader(b), maxFrame).ReadFrame(nil)
	if err != nil {
		return err
	}
	switch typ {
	case TypeInfer:
		_, err = DecodeInfer(payload, nil)
	case TypeResult:
		err = DecodeResult(payload, &Result{})
	case TypeHello:
		err = DecodeJSON(typ, payload, &Hello{})
	case TypeLoad:
		err = DecodeJSON(typ, payload, &Load{})
	case TypeLoaded:
		err = DecodeJSON(typ, payload, &Loaded{})
	}
	return err
}

func headersEqual(a, b []Header) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
