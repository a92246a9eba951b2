package toolkit

import (
	"github.com/sagebox/sagebox/internal/pyvalue"
	"sort"
	"strings"
)

// toCmdArgs turns decoded user hyperparameters into the script's argv tail
// exactly as the toolkit's mapping.to_cmd_args does: keys sorted, "--key"
// (or "-k" for a one-character key), values through str() except that None
// is an empty argument and a dict becomes "k1=v1,k2=v2" with sorted keys.
// The result is an argv list: no shell ever splits it.
func toCmdArgs(hps pyvalue.Value) []string {
	keys := append([]string(nil), hps.Keys()...)
	sort.Strings(keys)
	out := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		v, _ := hps.Get(k)
		out = append(out, argName(k), argValue(v))
	}
	return out
}

func argName(k string) string {
	switch len([]rune(k)) {
	case 0:
		return ""
	case 1:
		return "-" + k
	}
	return "--" + k
}

func argValue(v pyvalue.Value) string {
	switch v.Kind() {
	case pyvalue.KindNone:
		return ""
	case pyvalue.KindDict:
		keys, vals := v.Keys(), v.Values()
		idx := make([]int, len(keys))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return keys[idx[a]] < keys[idx[b]] })
		parts := make([]string, 0, len(idx))
		for _, i := range idx {
			parts = append(parts, keys[i]+"="+vals[i].Str())
		}
		return strings.Join(parts, ",")
	}
	return v.Str()
}

// shellQuote quotes s for /bin/sh the way Python's shlex.quote does.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./-_", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// ShellJoin is shlex.join: each argument quoted, separated by spaces.
func ShellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}
