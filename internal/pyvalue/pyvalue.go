// Package pyvalue is the Python value model of the SageMaker training
// toolkit's hyperparameter handling: a parser with the semantics of
// Python's json.loads, and Python's str(), repr() and json.dumps of the
// values it produces, byte for byte.
package pyvalue

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

// Kind is a Value's Python type.
type Kind uint8

// The kinds json.loads produces.
const (
	KindNone Kind = iota
	KindBool
	KindInt
	KindFloat
	KindStr
	KindList
	KindDict
)

// Value is one Python value produced by json.loads. The zero Value is
// None.
type Value struct {
	kind Kind
	b    bool
	s    string // KindStr's text, or KindInt's canonical decimal digits
	f    float64
	list []Value
	keys []string // KindDict, in insertion order
	vals []Value
}

// Str is a str.
func Str(s string) Value { return Value{kind: KindStr, s: s} }

// Bool is a bool.
func Bool(b bool) Value { return Value{kind: KindBool, b: b} }

// Int is an int.
func Int(i int) Value { return Value{kind: KindInt, s: strconv.Itoa(i)} }

// None is None.
func None() Value { return Value{kind: KindNone} }

// Float is a float.
func Float(f float64) Value { return Value{kind: KindFloat, f: f} }

// List is a list of v.
func List(v ...Value) Value { return Value{kind: KindList, list: append([]Value{}, v...)} }

// Strings is a list of strs.
func Strings(ss []string) Value {
	v := Value{kind: KindList, list: make([]Value, 0, len(ss))}
	for _, s := range ss {
		v.list = append(v.list, Str(s))
	}
	return v
}

// DictOf builds a dict from a Go map; insertion order is sorted key order.
func DictOf(m map[string]Value) Value {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	d := Value{kind: KindDict}
	for _, k := range keys {
		d.keys = append(d.keys, k)
		d.vals = append(d.vals, m[k])
	}
	return d
}

// NewDict is an empty dict.
func NewDict() Value { return Value{kind: KindDict} }

// Kind is v's Python type.
func (v Value) Kind() Kind { return v.kind }

// Keys are a dict's keys in insertion order (a copy).
func (v Value) Keys() []string { return append([]string(nil), v.keys...) }

// Values are a dict's values, in the order of Keys (a copy).
func (v Value) Values() []Value { return append([]Value(nil), v.vals...) }

// Elems are a list's elements (a copy).
func (v Value) Elems() []Value { return append([]Value(nil), v.list...) }

// Set assigns d[k] = v with Python's semantics: an existing key keeps its
// position and takes the new value.
func (d *Value) Set(k string, v Value) {
	for i, old := range d.keys {
		if old == k {
			d.vals[i] = v
			return
		}
	}
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
}

// Get returns d[k].
func (d Value) Get(k string) (Value, bool) {
	for i, old := range d.keys {
		if old == k {
			return d.vals[i], true
		}
	}
	return Value{}, false
}

// Truthy is Python's bool(v).
func (v Value) Truthy() bool {
	switch v.kind {
	case KindBool:
		return v.b
	case KindInt:
		return strings.TrimLeft(strings.TrimPrefix(v.s, "-"), "0") != ""
	case KindFloat:
		return v.f != 0
	case KindStr:
		return v.s != ""
	case KindList:
		return len(v.list) > 0
	case KindDict:
		return len(v.keys) > 0
	}
	return false
}

// Decode is the toolkit's read_hyperparameters for one value:
// json.loads, and the raw string when that fails.
func Decode(raw string) Value {
	v, err := ParseJSON(raw)
	if err != nil {
		return Str(raw)
	}
	return v
}

// ParseJSON parses s the way Python's json.loads does, including its
// extensions NaN, Infinity and -Infinity.
func ParseJSON(s string) (Value, error) {
	p := &jsonParser{s: s}
	p.ws()
	v, err := p.value(0)
	if err != nil {
		return Value{}, err
	}
	p.ws()
	if p.i != len(p.s) {
		return Value{}, fmt.Errorf("extra data at offset %d", p.i)
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

func (p *jsonParser) value(depth int) (Value, error) {
	if depth > 500 {
		return Value{}, fmt.Errorf("%w: nested too deeply", errJSON)
	}
	if p.i >= len(p.s) {
		return Value{}, fmt.Errorf("%w: unexpected end", errJSON)
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.str()
		return Str(s), err
	case p.lit("null"):
		return None(), nil
	case p.lit("true"):
		return Bool(true), nil
	case p.lit("false"):
		return Bool(false), nil
	case p.lit("NaN"):
		return Float(math.NaN()), nil
	case p.lit("Infinity"):
		return Float(math.Inf(1)), nil
	case p.lit("-Infinity"):
		return Float(math.Inf(-1)), nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return Value{}, fmt.Errorf("%w: unexpected %q at offset %d", errJSON, p.s[p.i], p.i)
}

func (p *jsonParser) object(depth int) (Value, error) {
	p.i++ // {
	d := Value{kind: KindDict}
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return d, nil
	}
	for {
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return Value{}, fmt.Errorf("%w: expected a key at offset %d", errJSON, p.i)
		}
		k, err := p.str()
		if err != nil {
			return Value{}, err
		}
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return Value{}, fmt.Errorf("%w: expected ':' at offset %d", errJSON, p.i)
		}
		p.i++
		p.ws()
		v, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		d.Set(k, v)
		p.ws()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return d, nil
		}
		return Value{}, fmt.Errorf("%w: expected ',' or '}' at offset %d", errJSON, p.i)
	}
}

func (p *jsonParser) array(depth int) (Value, error) {
	p.i++ // [
	l := Value{kind: KindList}
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return l, nil
	}
	for {
		p.ws()
		v, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
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
		return Value{}, fmt.Errorf("%w: expected ',' or ']' at offset %d", errJSON, p.i)
	}
}

func (p *jsonParser) number() (Value, error) {
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
		return Value{}, fmt.Errorf("%w: bad number at offset %d", errJSON, start)
	}
	if p.s[intStart] == '0' && p.i-intStart > 1 {
		// Python stops at the leading 0 and then reports extra data.
		return Value{}, fmt.Errorf("%w: leading zero at offset %d", errJSON, start)
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
			return Value{kind: KindInt, s: d}, nil
		}
		return Value{kind: KindInt, s: "-" + d}, nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return Value{}, fmt.Errorf("%w: %w", errJSON, err)
	}
	return Float(f), nil // out of range: ±Inf or 0, as Python's float()
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

// Str is Python's str(v): strings verbatim, everything else as repr.
func (v Value) Str() string {
	if v.kind == KindStr {
		return v.s
	}
	return v.Repr()
}

// Repr is Python's repr(v).
func (v Value) Repr() string {
	var b strings.Builder
	v.writeRepr(&b)
	return b.String()
}

func (v Value) writeRepr(b *strings.Builder) {
	switch v.kind {
	case KindNone:
		b.WriteString("None")
	case KindBool:
		if v.b {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case KindInt:
		b.WriteString(v.s)
	case KindFloat:
		b.WriteString(FloatRepr(v.f))
	case KindStr:
		b.WriteString(pyStrRepr(v.s))
	case KindList:
		b.WriteByte('[')
		for i, e := range v.list {
			if i > 0 {
				b.WriteString(", ")
			}
			e.writeRepr(b)
		}
		b.WriteByte(']')
	case KindDict:
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

// FloatRepr formats f as Python's repr(float): the shortest digits that
// round-trip, in fixed notation when the decimal exponent is in [-4, 16),
// else scientific with a signed two-digit-minimum exponent ("1e-05",
// "1.5e+16"); whole numbers keep ".0".
func FloatRepr(f float64) string {
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

// JSONDumps is json.dumps(v, sort_keys=True, separators=(",", ":"),
// ensure_ascii=True), the encoding of every non-string SM_* value.
func (v Value) JSONDumps() string {
	var b strings.Builder
	v.writeJSON(&b)
	return b.String()
}

func (v Value) writeJSON(b *strings.Builder) {
	switch v.kind {
	case KindNone:
		b.WriteString("null")
	case KindBool:
		if v.b {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case KindInt:
		b.WriteString(v.s)
	case KindFloat:
		switch {
		case math.IsNaN(v.f):
			b.WriteString("NaN")
		case math.IsInf(v.f, 1):
			b.WriteString("Infinity")
		case math.IsInf(v.f, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(FloatRepr(v.f))
		}
	case KindStr:
		writeJSONString(b, v.s)
	case KindList:
		b.WriteByte('[')
		for i, e := range v.list {
			if i > 0 {
				b.WriteByte(',')
			}
			e.writeJSON(b)
		}
		b.WriteByte(']')
	case KindDict:
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

// EnvString is the toolkit's encoding of a value in an SM_* variable: str
// as is, None as "", anything else as compact sorted JSON.
func (v Value) EnvString() string {
	switch v.kind {
	case KindStr:
		return v.s
	case KindNone:
		return ""
	}
	return v.JSONDumps()
}
