package toolkit

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sagebox/sagebox"
)

// MetricMatcher applies a job's MetricDefinitions to log lines. As on
// SageMaker the value is the first capture group (the whole match when the
// regex has none), parsed as a float.
type MetricMatcher struct {
	defs []compiledMetric
}

type compiledMetric struct {
	name string
	re   *regexp.Regexp
}

// CompileMetrics compiles defs with Go's regexp after translating the bits
// of Python syntax that differ cheaply: (?P<name>...) and (?<name>...) work
// as they are; \Z becomes \z. Definitions that still do not compile
// (lookarounds, backreferences) are skipped and reported in bad.
func CompileMetrics(defs []sagebox.MetricDefinition) (m *MetricMatcher, bad []string) {
	m = &MetricMatcher{}
	for _, d := range defs {
		re, err := regexp.Compile(translatePythonRegex(d.Regex))
		if err != nil {
			bad = append(bad, fmt.Sprintf("metric %q: regex %q is not supported: %v", d.Name, d.Regex, err))
			continue
		}
		m.defs = append(m.defs, compiledMetric{name: d.Name, re: re})
	}
	return m, bad
}

func translatePythonRegex(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			if s[i+1] == 'Z' {
				b.WriteString(`\z`)
			} else {
				b.WriteByte(s[i])
				b.WriteByte(s[i+1])
			}
			i++
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Match returns the metric values found in line.
func (m *MetricMatcher) Match(line string, ts time.Time) []sagebox.MetricPoint {
	var out []sagebox.MetricPoint
	for _, d := range m.defs {
		sub := d.re.FindStringSubmatch(line)
		if sub == nil {
			continue
		}
		text := sub[0]
		if len(sub) > 1 {
			text = sub[1]
		}
		v, ok := parsePythonFloat(text)
		if !ok {
			continue
		}
		out = append(out, sagebox.MetricPoint{Name: d.name, Value: v, Timestamp: ts})
	}
	return out
}

// parsePythonFloat accepts what Python's float() does for metric text
// (surrounding spaces, underscores between digits) and rejects non-finite
// values, which metric stores cannot hold.
func parsePythonFloat(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "_") {
		s = strings.ReplaceAll(s, "_", "")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

// FinalMetric is the last value of one metric on one host.
type FinalMetric struct {
	Value  float64 `json:"value"`
	TimeMS int64   `json:"time_ms"`
}

// FinalMetricData merges the hosts' last values: per metric, the latest.
func FinalMetricData(hosts []map[string]FinalMetric) []sagebox.MetricData {
	last := map[string]FinalMetric{}
	for _, h := range hosts {
		for name, v := range h {
			if old, ok := last[name]; !ok || v.TimeMS >= old.TimeMS {
				last[name] = v
			}
		}
	}
	names := make([]string, 0, len(last))
	for n := range last {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]sagebox.MetricData, 0, len(names))
	for _, n := range names {
		v := last[n]
		out = append(out, sagebox.MetricData{MetricName: n, Value: v.Value, Timestamp: sagebox.NewTime(time.UnixMilli(v.TimeMS))})
	}
	return out
}
