package controlplane

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sagebox/sagebox"
)

// pattern is a constraint regular expression: src as AWS prints it in
// messages, re compiled to match the whole value (AWS patterns are
// full-match).
type pattern struct {
	src string
	re  *regexp.Regexp
}

func newPattern(src string) pattern {
	return pattern{src: src, re: regexp.MustCompile(`^(?:` + src + `)$`)}
}

// violations collects constraint violations in AWS's wording.
type violations []string

// noMax is the max of a constraint without an upper bound.
const noMax = -1

// add records that value at path fails constraint. value is rendered as
// AWS renders it: null, 'string', '5', '[a, b]', '{k=v}'.
func (v *violations) add(value any, path, constraint string) {
	*v = append(*v, "Value "+render(value)+" at '"+path+"' failed to satisfy constraint: "+constraint)
}

// err returns the collected violations as one error with code, or nil.
func (v violations) err(code string) error {
	switch len(v) {
	case 0:
		return nil
	case 1:
		return &sagebox.Error{Code: code, Message: "1 validation error detected: " + v[0]}
	default:
		return &sagebox.Error{Code: code, Message: fmt.Sprintf("%d validation errors detected: %s", len(v), strings.Join(v, "; "))}
	}
}

// required records a null violation when the member is absent.
func (v *violations) required(path string, present bool) bool {
	if !present {
		v.add(nil, path, "Member must not be null")
	}
	return present
}

// str checks a string member. An empty string counts as absent: it is a
// violation only when the member is required. max < 0 means no maximum;
// p may be nil.
func (v *violations) str(path, s string, required bool, min, max int, p *pattern) {
	if s == "" {
		if required {
			v.required(path, false)
		}
		return
	}
	n := utf8.RuneCountInString(s)
	if n < min {
		v.add(s, path, fmt.Sprintf("Member must have length greater than or equal to %d", min))
	}
	if max >= 0 && n > max {
		v.add(s, path, fmt.Sprintf("Member must have length less than or equal to %d", max))
	}
	if p != nil && !p.re.MatchString(s) {
		v.add(s, path, "Member must satisfy regular expression pattern: "+p.src)
	}
}

// enum checks an optional string member against its allowed values.
func (v *violations) enum(path, s string, allowed ...string) {
	if s != "" && !slices.Contains(allowed, s) {
		v.add(s, path, "Member must satisfy enum value set: ["+strings.Join(allowed, ", ")+"]")
	}
}

// num checks an optional integer member; max < 0 means no maximum.
func (v *violations) num(path string, n *int64, min, max int64) {
	if n == nil {
		return
	}
	if *n < min {
		v.add(*n, path, fmt.Sprintf("Member must have value greater than or equal to %d", min))
	}
	if max >= 0 && *n > max {
		v.add(*n, path, fmt.Sprintf("Member must have value less than or equal to %d", max))
	}
}

// count checks the number of entries of a list or map member.
func (v *violations) count(path string, value any, n, min, max int) {
	if n < min {
		v.add(value, path, fmt.Sprintf("Member must have length greater than or equal to %d", min))
	}
	if max >= 0 && n > max {
		v.add(value, path, fmt.Sprintf("Member must have length less than or equal to %d", max))
	}
}

// stringMap checks a map member's size and every key and value, reporting
// at most one violation for keys and one for values, as AWS does.
func (v *violations) stringMap(path string, m map[string]string, maxEntries int, key, value shape) {
	v.count(path, m, len(m), 0, maxEntries)
	badKey, badValue := false, false
	for k, val := range m {
		badKey = badKey || !key.ok(k)
		badValue = badValue || !value.ok(val)
	}
	if badKey {
		v.add(m, path, "Map keys must satisfy constraint: ["+key.String()+"]")
	}
	if badValue {
		v.add(m, path, "Map value must satisfy constraint: ["+value.String()+"]")
	}
}

// shape is a string shape's constraints, for map keys and values.
type shape struct {
	min, max int // max < 0: none
	pattern  *pattern
}

func (s shape) ok(str string) bool {
	n := utf8.RuneCountInString(str)
	return n >= s.min && (s.max < 0 || n <= s.max) && (s.pattern == nil || s.pattern.re.MatchString(str))
}

// String lists the constraints as AWS does inside "must satisfy
// constraint: [...]".
func (s shape) String() string {
	var c []string
	if s.max >= 0 {
		c = append(c, fmt.Sprintf("Member must have length less than or equal to %d", s.max))
	}
	c = append(c, fmt.Sprintf("Member must have length greater than or equal to %d", s.min))
	if s.pattern != nil {
		c = append(c, "Member must satisfy regular expression pattern: "+s.pattern.src)
	}
	return strings.Join(c, ", ")
}

// render writes a value the way AWS messages show it.
func render(value any) string {
	switch x := value.(type) {
	case nil:
		return "null"
	case string:
		return "'" + x + "'"
	case int64:
		return "'" + strconv.FormatInt(x, 10) + "'"
	case []string:
		return "'[" + strings.Join(x, ", ") + "]'"
	case map[string]string:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + x[k]
		}
		return "'{" + strings.Join(parts, ", ") + "}'"
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return "'" + fmt.Sprint(x) + "'"
		}
		return "'" + string(b) + "'"
	}
}

// member is the path of the i-th (0-based) element of a list member, as AWS
// spells it: "inputDataConfig.1.member".
func member(list string, i int) string {
	return list + "." + strconv.Itoa(i+1) + ".member"
}
