package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzExtract feeds Extract archives built from a small text script, one
// entry per line: "<type>|<name>|<link or body>" with type f (file), d
// (dir), l (symlink) or h (hard link). "$OUT" in a name or link becomes the
// absolute path of a directory beside the destination, so the fuzzer can aim
// at a real outside path. Input that is not a script is also tried as raw
// archive bytes. Whatever happens, nothing may be written outside the
// destination and no symlink in it may resolve outside.
func FuzzExtract(f *testing.F) {
	seeds := []string{
		"f|train.py|print(1)\nd|src/|\nf|src/a.py|x",
		"f|../evil|x",
		"f|$OUT/evil|x",
		"l|l|$OUT\nf|l/evil|x",
		"l|l|..\nf|l/evil|x",
		"l|a|.\nl|b|a/..\nf|b/evil|x",
		"l|a|.\nl|b|a/..\nh|c|b/../outside/canary",
		"h|h|../outside/canary",
		"d|x/|\nl|x/y|../..\nd|x/y/z/|",
		"f|.|x",
		"l|self|self\nf|self/x|y",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Add(buildTar(f, []tarEntry{{typ: tar.TypeReg, name: "a/b", body: "x"}}, true))
	f.Fuzz(func(t *testing.T, data []byte) {
		sandbox := t.TempDir()
		dest := filepath.Join(sandbox, "dest")
		outside := filepath.Join(sandbox, "outside")
		if err := os.MkdirAll(outside, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(outside, "canary"), []byte("canary"), 0o644); err != nil {
			t.Fatal(err)
		}
		archive := data
		if entries, ok := parseScript(string(data), outside); ok {
			if b, err := buildTarErr(entries, len(data)%2 == 0); err == nil {
				archive = b
			}
		}
		_ = Extract(context.Background(), bytes.NewReader(archive), dest)
		assertContained(t, sandbox)
	})
}

func parseScript(s, outside string) ([]tarEntry, bool) {
	if len(s) > 4096 || strings.ContainsRune(s, 0) {
		return nil, false
	}
	var out []tarEntry
	for _, line := range strings.Split(s, "\n") {
		parts := strings.SplitN(line, "|", 3)
		if len(parts) != 3 || parts[1] == "" {
			return nil, false
		}
		name := strings.ReplaceAll(parts[1], "$OUT", outside)
		arg := strings.ReplaceAll(parts[2], "$OUT", outside)
		switch parts[0] {
		case "f":
			out = append(out, tarEntry{typ: tar.TypeReg, name: name, body: arg})
		case "d":
			out = append(out, tarEntry{typ: tar.TypeDir, name: name})
		case "l":
			out = append(out, tarEntry{typ: tar.TypeSymlink, name: name, link: arg})
		case "h":
			out = append(out, tarEntry{typ: tar.TypeLink, name: name, link: arg})
		default:
			return nil, false
		}
	}
	return out, len(out) > 0
}
