package pyvalue

import (
	"math"
	"testing"
)

func TestPyFloatRepr(t *testing.T) {
	tests := []struct {
		f    float64
		want string
	}{
		{0.001, "0.001"}, {1e-05, "1e-05"}, {0.0001, "0.0001"}, {1e-4, "0.0001"},
		{1e16, "1e+16"}, {1e15, "1000000000000000.0"}, {123456789.0, "123456789.0"},
		{1.5e-7, "1.5e-07"}, {-2.5, "-2.5"}, {0, "0.0"}, {math.Copysign(0, -1), "-0.0"},
		{1e100, "1e+100"}, {1.0 / 3, "0.3333333333333333"}, {6.666666666666666e+19, "6.666666666666666e+19"},
		{math.Inf(1), "inf"}, {math.NaN(), "nan"}, {5e-324, "5e-324"}, {12345.678, "12345.678"},
	}
	for _, tt := range tests {
		if got := FloatRepr(tt.f); got != tt.want {
			t.Errorf("FloatRepr(%v) = %q, want %q", tt.f, got, tt.want)
		}
	}
}

func TestParsePyJSONErrors(t *testing.T) {
	for _, s := range []string{"", "{", "[1,]", "{'a': 1}", `"\x"`, "tru", `{"a" 1}`, "1 2", "\"a\nb\"", "-", "[1e]"} {
		if _, err := ParseJSON(s); err == nil {
			t.Errorf("ParseJSON(%q) succeeded, want an error", s)
		}
	}
}

func TestTruthy(t *testing.T) {
	for raw, want := range map[string]bool{
		"true": true, "false": false, "0": false, "1": true, "0.0": false, `""`: false, `"x"`: true,
		"[]": false, "{}": false, "null": false, "True": true, "-0": false, "0.5": true,
	} {
		if got := Decode(raw).Truthy(); got != want {
			t.Errorf("truthy(%s) = %v, want %v", raw, got, want)
		}
	}
}

// FuzzParseJSON checks that whatever ParseJSON accepts survives its own
// json.dumps: the dump parses again, to the same dump, and str() and
// repr() do not panic. Run it with go test -fuzz=FuzzParseJSON.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{
		"10", "0.001", "1e400", "-0", "NaN", "-Infinity", `"a\"b'c"`, `[1.5, "it's", {"z": [true, null]}]`,
		`{"k": 1, "k": 2, "j": 0}`, `"\ud83d\ude00"`, `"\ud800"`, "123456789012345678901234567890", "[[[[]]]]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseJSON(s)
		if err != nil {
			return
		}
		_, _ = v.Str(), v.Repr()
		dump := v.JSONDumps()
		w, err := ParseJSON(dump)
		if err != nil {
			t.Fatalf("ParseJSON(%q) = %q, which does not parse: %v", s, dump, err)
		}
		if again := w.JSONDumps(); again != dump {
			t.Fatalf("ParseJSON(%q): dump %q parses and dumps as %q", s, dump, again)
		}
	})
}
