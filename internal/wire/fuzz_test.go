package wire

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func addGoldenSeeds(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.bin"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzReadFrame feeds arbitrary streams to the frame reader and the payload
// decoders: they must never panic or allocate beyond the frame limit, and
// whatever decodes must re-encode to the same bytes.
func FuzzReadFrame(f *testing.F) {
	addGoldenSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data), 1<<16)
		for {
			typ, p, err := r.ReadFrame(nil)
			if err != nil {
				return
			}
			switch typ {
			case TypeInfer:
				reqs, err := DecodeInfer(p, nil)
				if err != nil {
					continue
				}
				if again := AppendInfer(nil, reqs)[HeaderSize:]; !bytes.Equal(again, p) {
					t.Fatalf("INFER re-encoding differs:\n%x\n%x", again, p)
				}
			case TypeResult:
				var res Result
				if err := DecodeResult(p, &res); err != nil {
					continue
				}
				if again := AppendResult(nil, &res)[HeaderSize:]; !bytes.Equal(again, p) {
					t.Fatalf("RESULT re-encoding differs:\n%x\n%x", again, p)
				}
			case TypeHello:
				_ = DecodeJSON(typ, p, &Hello{})
			case TypeLoaded:
				_ = DecodeJSON(typ, p, &Loaded{})
			}
		}
	})
}

// FuzzDecodeResult decodes arbitrary RESULT payloads.
func FuzzDecodeResult(f *testing.F) {
	f.Add(AppendResult(nil, &Result{Responses: []Response{{ID: 1, Status: 200, Body: []byte("x")}}})[HeaderSize:])
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, p []byte) {
		var res Result
		if err := DecodeResult(p, &res); err != nil {
			return
		}
		if again := AppendResult(nil, &res)[HeaderSize:]; !bytes.Equal(again, p) {
			t.Fatalf("re-encoding differs")
		}
	})
}

// FuzzDecodeInfer decodes arbitrary INFER payloads.
func FuzzDecodeInfer(f *testing.F) {
	f.Add(AppendInfer(nil, sampleRequests())[HeaderSize:])
	f.Fuzz(func(t *testing.T, p []byte) {
		reqs, err := DecodeInfer(p, nil)
		if err != nil {
			return
		}
		if again := AppendInfer(nil, reqs)[HeaderSize:]; !bytes.Equal(again, p) {
			t.Fatalf("re-encoding differs")
		}
	})
}

// FuzzDecodeInferOriginal decodes arbitrary INFER payloads of a pipeline
// stage (every element with the original request).
func FuzzDecodeInferOriginal(f *testing.F) {
	reqs := sampleRequests()
	for i := range reqs {
		reqs[i].Original = &Original{ContentType: "text/csv", Accept: "a", Body: reqs[i].Body}
	}
	f.Add(AppendInfer(nil, reqs)[HeaderSize:])
	f.Fuzz(func(t *testing.T, p []byte) {
		reqs, err := DecodeInferWith(p, nil, true)
		if err != nil {
			return
		}
		if again := AppendInfer(nil, reqs)[HeaderSize:]; !bytes.Equal(again, p) {
			t.Fatalf("re-encoding differs")
		}
	})
}
