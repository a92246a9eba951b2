package training

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// The toolkit decodes every hyperparameter with Python's json.loads and then
// prints the values with str() (argv) or json.dumps (SM_* variables). To
// produce the same bytes, values are kept as a small Python object model:
// ints stay arbitrary-precision digit strings, floats are float64, and dicts
// keep insertion order (str() of a nested dict shows it; json.dumps sorts).

type pyKind uint8

const (
	pyNone pyKind = iota
	pyBool
	pyInt
	pyFloat
	pyStr
	pyList
	pyDict
)

// pyValue is one Python value produced by json.loads.
type pyValue struct {
	kind pyKind
	b    bool
	s    string // pyStr's text, or pyInt's canonical decimal digits
	f    float64
	list []pyValue
	keys []string // pyDict, in insertion order
	vals []pyValue
}

func pyS(s string) pyValue     { return pyValue{kind: pyStr, s: s} }
func pyB(b bool) pyValue       { return pyValue{kind: pyBool, b: b} }
func pyI(i int) pyValue        { return pyValue{kind: pyInt, s: strconv.Itoa(i)} }
func pyNull() pyValue          { return pyValue{kind: pyNone} }
func pyF(f float64) pyValue    { return pyValue{kind: pyFloat, f: f} }
func pyL(v ...pyValue) pyValue { return pyValue{kind: pyList, list: append([]pyValue{}, v...)} }

func pyStrings(ss []string) pyValue {
	v := pyValue{kind: pyList, list: make([]pyValue, 0, len(ss))}
	for _, s := range ss {
		v.list = append(v.list, pyS(s))
	}
	return v
}

// pyDictOf builds a dict from a Go map; insertion order is sorted key order.
func pyDictOf(m map[string]pyValue) pyValue {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	d := pyValue{kind: pyDict}
	for _, k := range keys {
		d.keys = append(d.keys, k)
		d.vals = append(d.vals, m[k])
	}
	return d
}

// set assigns d[k] = v with Python's semantics: an existing key keeps its
// position and takes the new value.
func (d *pyValue) set(k string, v pyValue) {
	for i, old := range d.keys {
		if old == k {
			d.vals[i] = v
			return
		}
	}
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
}

// get returns d[k].
func (d pyValue) get(k string) (pyValue, bool) {
	for i, old := range d.keys {
		if old == k {
			return d.vals[i], true
		}
	}
	return pyValue{}, false
}

// truthy is Python's bool(v).
func (v pyValue) truthy() bool {
	switch v.kind {
	case pyBool:
		return v.b
	case pyInt:
		return strings.TrimLeft(strings.TrimPrefix(v.s, "-"), "0") != ""
	case pyFloat:
		return v.f != 0
	case pyStr:
		return v.s != ""
	case pyList:
		return len(v.list) > 0
	case pyDict:
		return len(v.keys) > 0
	}
	return false
}

// decodeHyperparameter is the toolkit's read_hyperparameters for one value:
// json.loads, and the raw string when that fails.
func decodeHyperparameter(raw string) pyValue {
	v, err := parsePyJSON(raw)
	if err != nil {
		return pyS(raw)
	}
	return v
}

// parsePyJSON parses s the way Python's json.loads does, including its
// extensions NaN, Infinity and -Infinity.
func parsePyJSON(s string) (pyValue, error) {
	p := &jsonParser{s: s}
	p.ws()
	v, err := p.value(0)
	if err != nil {
		return pyValue{}, err
	}
	p.ws()
	if p.i != len(p.s) {
		return pyValue{}, fmt.Errorf("extra data at offset %d", p.i)
	}
	return v, nil
}

type jsonParser struct {
	s string
	i int
}

var errJSON = errors.New("invalid JSON")

func (p *jsonParser) ws() {
	for p.i < len(p.s) && strings.IndexByte(" \t\n\r", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *jsonParser) lit(word string) bool {
	if strings.HasPrefix(p.s[p.i:], word) {
		p.i += len(word)
		return true
	}
	return false
}

func (p *jsonParser) value(depth int) (pyValue, error) {
	if depth > 500 {
		return pyValue{}, fmt.Errorf("%w: nested too deeply", errJSON)
	}
	if p.i >= len(p.s) {
		return pyValue{}, fmt.Errorf("%w: unexpected end", errJSON)
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.str()
		return pyS(s), err
	case p.lit("null"):
		return pyNull(), nil
	case p.lit("true"):
		return pyB(true), nil
	case p.lit("false"):
		return pyB(false), nil
	case p.lit("NaN"):
		return pyF(math.NaN()), nil
	case p.lit("Infinity"):
		return pyF(math.Inf(1)), nil
	case p.lit("-Infinity"):
		return pyF(math.Inf(-1)), nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return pyValue{}, fmt.Errorf("%w: unexpected %q at offset %d", errJSON, p.s[p.i], p.i)
}

func (p *jsonParser) object(depth int) (pyValue, error) {
	p.i++ // {
	d := pyValue{kind: pyDict}
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return d, nil
	}
	for {
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return pyValue{}, fmt.Errorf("%w: expected a key at offset %d", errJSON, p.i)
		}
		k, err := p.str()
		if err != nil {
			return pyValue{}, err
		}
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return pyValue{}, fmt.Errorf("%w: expected ':' at offset %d", errJSON, p.i)
		}
		p.i++
		p.ws()
		v, err := p.value(depth + 1)
		if err != nil {
			return pyValue{}, err
		}
		d.set(k, v)
		p.ws()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return d, nil
		}
		return pyValue{}, fmt.Errorf("%w: expected ',' or '}' at offset %d", errJSON, p.i)
	}
}

func (p *jsonParser) array(depth int) (pyValue, error) {
	p.i++ // [
	l := pyValue{kind: pyList}
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return l, nil
	}
	for {
		p.ws()
		v, err := p.value(depth + 1)
		if err != nil {
			return pyValue{}, err
		}
		l.list = append(l.list, v)
		p.ws()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == ']' {
			p.i++
			return l, nil
		}
		return pyValue{}, fmt.Errorf("%w: expected ',' or ']' at offset %d", errJSON, p.i)
	}
}

func (p *jsonParser) number() (pyValue, error) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.s[p.i] == '-' {
		p.i++
	}
	intStart := p.i
	if digits() == 0 {
		return pyValue{}, fmt.Errorf("%w: bad number at offset %d", errJSON, start)
	}
	if p.s[intStart] == '0' && p.i-intStart > 1 {
		// Python stops at the leading 0 and then reports extra data.
		return pyValue{}, fmt.Errorf("%w: leading zero at offset %d", errJSON, start)
	}
	isFloat := false
	if p.i < len(p.s) && p.s[p.i] == '.' {
		save := p.i
		p.i++
		if digits() == 0 {
			p.i = save // "1." : Python parses 1 then fails on extra data
		} else {
			isFloat = true
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		save := p.i
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			p.i = save
		} else {
			isFloat = true
		}
	}
	text := p.s[start:p.i]
	if !isFloat {
		neg := strings.HasPrefix(text, "-")
		d := strings.TrimPrefix(text, "-")
		if d == "0" || !neg {
			return pyValue{kind: pyInt, s: d}, nil
		}
		return pyValue{kind: pyInt, s: "-" + d}, nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return pyValue{}, fmt.Errorf("%w: %w", errJSON, err)
	}
	return pyF(f), nil // out of range: ±Inf or 0, as Python's float()
}

func (p *jsonParser) str() (string, error) {
	p.i++ // opening quote
	var b strings.Builder
	for {
		if p.i >= len(p.s) {
			return "", fmt.Errorf("%w: unterminated string", errJSON)
		}
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return b.String(), nil
		case c < 0x20:
			return "", fmt.Errorf("%w: control character in string at offset %d", errJSON, p.i)
		case c == '\\':
			if p.i+1 >= len(p.s) {
				return "", fmt.Errorf("%w: unterminated escape", errJSON)
			}
			e := p.s[p.i+1]
			p.i += 2
			switch e {
			case '"', '\\', '/':
				b.WriteByte(e)
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				r, err := p.hex4()
				if err != nil {
					return "", err
				}
				if utf16.IsSurrogate(r) && strings.HasPrefix(p.s[p.i:], `\u`) {
					save := p.i
					p.i += 2
					r2, err := p.hex4()
					if err == nil {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							b.WriteRune(dec)
							continue
						}
					}
					p.i = save
				}
				b.WriteRune(r) // a lone surrogate becomes U+FFFD
			default:
				return "", fmt.Errorf("%w: invalid escape \\%c", errJSON, e)
			}
		default:
			b.WriteByte(c)
			p.i++
		}
	}
}

func (p *jsonParser) hex4() (rune, error) {
	if p.i+4 > len(p.s) {
		return 0, fmt.Errorf("%w: short \\u escape", errJSON)
	}
	n, err := strconv.ParseUint(p.s[p.i:p.i+4], 16, 32)
	if err != nil {
		return 0, fmt.Errorf("%w: bad \\u escape", errJSON)
	}
	p.i += 4
	return rune(n), nil
}

// pyStr is Python's str(v): strings verbatim, everything else as repr.
func (v pyValue) pyStr() string {
	if v.kind == pyStr {
		return v.s
	}
	return v.repr()
}

// repr is Python's repr(v).
func (v pyValue) repr() string {
	var b strings.Builder
	v.writeRepr(&b)
	return b.String()
}

func (v pyValue) writeRepr(b *strings.Builder) {
	switch v.kind {
	case pyNone:
		b.WriteString("None")
	case pyBool:
		if v.b {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case pyInt:
		b.WriteString(v.s)
	case pyFloat:
		b.WriteString(pyFloatRepr(v.f))
	case pyStr:
		b.WriteString(pyStrRepr(v.s))
	case pyList:
		b.WriteByte('[')
		for i, e := range v.list {
			if i > 0 {
				b.WriteString(", ")
			}
			e.writeRepr(b)
		}
		b.WriteByte(']')
	case pyDict:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(pyStrRepr(k))
			b.WriteString(": ")
			v.vals[i].writeRepr(b)
		}
		b.WriteByte('}')
	}
}

// pyFloatRepr formats f as Python's repr(float): the shortest digits that
// round-trip, in fixed notation when the decimal exponent is in [-4, 16),
// else scientific with a signed two-digit-minimum exponent ("1e-05",
// "1.5e+16"); whole numbers keep ".0".
func pyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	sign := ""
	if math.Signbit(f) {
		sign = "-"
		f = -f
	}
	if f == 0 {
		return sign + "0.0"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)
	decpt := exp + 1 // value = 0.<digits> × 10^decpt
	if decpt > -4 && decpt <= 16 {
		switch {
		case decpt <= 0:
			return sign + "0." + strings.Repeat("0", -decpt) + digits
		case decpt >= len(digits):
			return sign + digits + strings.Repeat("0", decpt-len(digits)) + ".0"
		default:
			return sign + digits[:decpt] + "." + digits[decpt:]
		}
	}
	m := digits[:1]
	if len(digits) > 1 {
		m += "." + digits[1:]
	}
	es := "+"
	if exp < 0 {
		es = "-"
		exp = -exp
	}
	return fmt.Sprintf("%s%se%s%02d", sign, m, es, exp)
}

// pyStrRepr is Python 3's repr(str): single quotes unless the text has a
// single quote and no double quote; printable non-ASCII kept as is.
func pyStrRepr(s string) string {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	var b strings.Builder
	b.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x7f:
			b.WriteRune(r)
		case unicode.IsPrint(r):
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteByte(quote)
	return b.String()
}

// jsonDumps is json.dumps(v, sort_keys=True, separators=(",", ":"),
// ensure_ascii=True), the encoding of every non-string SM_* value.
func (v pyValue) jsonDumps() string {
	var b strings.Builder
	v.writeJSON(&b)
	return b.String()
}

func (v pyValue) writeJSON(b *strings.Builder) {
	switch v.kind {
	case pyNone:
		b.WriteString("null")
	case pyBool:
		if v.b {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case pyInt:
		b.WriteString(v.s)
	case pyFloat:
		switch {
		case math.IsNaN(v.f):
			b.WriteString("NaN")
		case math.IsInf(v.f, 1):
			b.WriteString("Infinity")
		case math.IsInf(v.f, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(pyFloatRepr(v.f))
		}
	case pyStr:
		writeJSONString(b, v.s)
	case pyList:
		b.WriteByte('[')
		for i, e := range v.list {
			if i > 0 {
				b.WriteByte(',')
			}
			e.writeJSON(b)
		}
		b.WriteByte(']')
	case pyDict:
		idx := make([]int, len(v.keys))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, c int) bool { return v.keys[idx[a]] < v.keys[idx[c]] })
		b.WriteByte('{')
		for n, i := range idx {
			if n > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, v.keys[i])
			b.WriteByte(':')
			v.vals[i].writeJSON(b)
		}
		b.WriteByte('}')
	}
}

// writeJSONString writes s as Python's json module does with ensure_ascii:
// everything outside printable ASCII as \uXXXX (lowercase hex, surrogate
// pairs above the BMP).
func writeJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r >= 0x20 && r <= 0x7e:
				b.WriteRune(r)
			case r > 0xffff:
				r1, r2 := utf16.EncodeRune(r)
				fmt.Fprintf(b, `\u%04x\u%04x`, r1, r2)
			default:
				fmt.Fprintf(b, `\u%04x`, r)
			}
		}
	}
	b.WriteByte('"')
}

// envString is the toolkit's encoding of a value in an SM_* variable: str
// as is, None as "", anything else as compact sorted JSON.
func (v pyValue) envString() string {
	switch v.kind {
	case pyStr:
		return v.s
	case pyNone:
		return ""
	}
	return v.jsonDumps()
}
