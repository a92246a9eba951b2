package staging

import "testing"

func TestPlaceKey(t *testing.T) {
	tests := []struct {
		prefix, key, rel string
		skip, err        bool
	}{
		{prefix: "data/train", key: "data/train/a/b.csv", rel: "a/b.csv"},
		{prefix: "data/train/", key: "data/train/a/b.csv", rel: "a/b.csv"},
		{prefix: "data", key: "data/x", rel: "x"},
		{prefix: "data", key: "data2/y", rel: "data2/y"},
		{prefix: "a/da", key: "a/data2/y", rel: "data2/y"},
		{prefix: "data/f.csv", key: "data/f.csv", rel: "f.csv"},
		{prefix: "", key: "a/b", rel: "a/b"},
		{prefix: "data", key: "data//x", rel: "x"},
		{prefix: "data/", key: "data/sub/", skip: true},
		{prefix: "data", key: "data/../../etc/passwd", err: true},
		{prefix: "", key: "../x", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.prefix+"|"+tt.key, func(t *testing.T) {
			rel, ok, err := placeKey(tt.prefix, tt.key)
			switch {
			case tt.err:
				if err == nil {
					t.Fatalf("placeKey = %q, want an error", rel)
				}
			case tt.skip:
				if ok || err != nil {
					t.Fatalf("placeKey = %q %v %v, want skipped", rel, ok, err)
				}
			default:
				if err != nil || !ok || rel != tt.rel {
					t.Fatalf("placeKey = %q %v %v, want %q", rel, ok, err, tt.rel)
				}
			}
		})
	}
}
