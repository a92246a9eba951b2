package toolkit

import (
	"github.com/sagebox/sagebox/internal/pyvalue"
	"strings"
	"testing"
)

// The expected strings below were produced by CPython 3.11: argv is the
// toolkit's _decode/dict rule over json.loads(raw) (or raw when that fails),
// env is str for strings, "" for None, else json.dumps(v, sort_keys=True,
// separators=(",", ":"), ensure_ascii=True).
func TestHyperparameterEncoding(t *testing.T) {
	tests := []struct {
		raw, argv, env string
	}{
		{"10", "10", "10"},
		{"0.001", "0.001", "0.001"},
		{"1e-05", "1e-05", "1e-05"},
		{`"adam"`, "adam", "adam"},
		{"true", "True", "true"},
		{"false", "False", "false"},
		{"[64, 32]", "[64, 32]", "[64,32]"},
		{`{"b": 2, "a": "x"}`, "a=x,b=2", `{"a":"x","b":2}`},
		{"null", "", ""},
		{"1e16", "1e+16", "1e+16"},
		{"1e15", "1000000000000000.0", "1000000000000000.0"},
		{"123456789012345678901234567890", "123456789012345678901234567890", "123456789012345678901234567890"},
		{"-0", "0", "0"},
		{"1.0", "1.0", "1.0"},
		{"0.1", "0.1", "0.1"},
		{"1e400", "inf", "Infinity"},
		{"NaN", "nan", "NaN"},
		{"-Infinity", "-inf", "-Infinity"},
		{`[1.5, "it's", {"z": [true, null]}, "a\"b'c"]`, `[1.5, "it's", {'z': [True, None]}, 'a"b\'c']`, `[1.5,"it's",{"z":[true,null]},"a\"b'c"]`},
		{"3.14159", "3.14159", "3.14159"},
		{"2.5e-7", "2.5e-07", "2.5e-07"},
		{"100000000000000000.0", "1e+17", "1e+17"},
		{"not json", "not json", "not json"},
		{`{"k": 1, "k": 2, "j": 0}`, "j=0,k=2", `{"j":0,"k":2}`},
		{"[1e22, 1.7976931348623157e308, 5e-324, 0.30000000000000004]", "[1e+22, 1.7976931348623157e+308, 5e-324, 0.30000000000000004]", "[1e+22,1.7976931348623157e+308,5e-324,0.30000000000000004]"},
		{" 7 ", "7", "7"},
		{"01", "01", "01"},
		{"1.", "1.", "1."},
		{"", "", ""},
		{`["héllo", "\u2028", "\u007f", "tab\t", "\ud83d\ude00", "\u00a0", "q'\"", "back\\slash"]`,
			`['héllo', '\u2028', '\x7f', 'tab\t', '😀', '\xa0', 'q\'"', 'back\\slash']`,
			`["h\u00e9llo","\u2028","\u007f","tab\t","\ud83d\ude00","\u00a0","q'\"","back\\slash"]`},
		{`{"cfg": {"y": 1, "x": [2.0, -0.0]}, "a": 1}`, `a=1,cfg={'y': 1, 'x': [2.0, -0.0]}`, `{"a":1,"cfg":{"x":[2.0,-0.0],"y":1}}`},
		{`{"n": null, "t": true, "s": "v w"}`, "n=None,s=v w,t=True", `{"n":null,"s":"v w","t":true}`},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			v := pyvalue.Decode(tt.raw)
			if got := argValue(v); got != tt.argv {
				t.Errorf("argv value = %q, want %q", got, tt.argv)
			}
			if got := v.EnvString(); got != tt.env {
				t.Errorf("env value = %q, want %q", got, tt.env)
			}
		})
	}
}

// The worked example of contract section 3.2, SDK-encoded.
func TestToCmdArgsReferenceExample(t *testing.T) {
	hps := map[string]string{
		"epochs": "10", "lr": "0.001", "use-cuda": "true", "opt": `"adam"`,
		"layers": "[64, 32]", "cfg": `{"b": 2, "a": "x"}`, "x": "null", "b": "false",
	}
	spec, err := NewSpec(jobWithHPs(hps), "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	got := toCmdArgs(spec.UserHyperParameters)
	want := []string{"-b", "False", "--cfg", "a=x,b=2", "--epochs", "10", "--layers", "[64, 32]", "--lr", "0.001", "--opt", "adam", "--use-cuda", "True", "-x", ""}
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Fatalf("argv = %q\nwant   %q", got, want)
	}
	if s := ShellJoin(got); s != "-b False --cfg a=x,b=2 --epochs 10 --layers '[64, 32]' --lr 0.001 --opt adam --use-cuda True -x ''" {
		t.Errorf("shell form = %s", s)
	}
}
