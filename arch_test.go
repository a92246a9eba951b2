package sagebox_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sagebox/sagebox"

// archRow is one row of ARCHITECTURE.md's package table.
type archRow struct {
	name    string // as written: "internal/training", "sagebox", "cmd/sagebox", "python/"
	pkg     string // import path
	imports string // the "imports" column, as written
	line    int
}

var rowRE = regexp.MustCompile("^\\|\\s*`([^`]+)`[^|]*\\|[^|]*\\|\\s*(.*?)\\s*\\|\\s*$")

// readPackageTable parses the table under "## Packages".
func readPackageTable(t *testing.T) []archRow {
	t.Helper()
	b, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []archRow
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if strings.HasPrefix(l, "## ") {
			in = l == "## Packages"
			continue
		}
		m := rowRE.FindStringSubmatch(l)
		if !in || m == nil {
			continue
		}
		name := m[1]
		pkg := module + "/" + strings.TrimSuffix(name, "/")
		if name == "sagebox" {
			pkg = module
		}
		rows = append(rows, archRow{name: name, pkg: pkg, imports: m[2], line: n})
	}
	if len(rows) == 0 {
		t.Fatal("no package table under \"## Packages\" in ARCHITECTURE.md")
	}
	return rows
}

// moduleImports runs go list: each package of the module and the module's
// packages it imports (test files not counted).
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	graph := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		var deps []string
		for _, d := range f[1:] {
			if d == module || strings.HasPrefix(d, module+"/") {
				deps = append(deps, d)
			}
		}
		graph[f[0]] = deps
	}
	return graph
}

// short is how the table names a package in the imports column.
func short(pkg string) string {
	switch {
	case pkg == module:
		return "root"
	case strings.HasPrefix(pkg, module+"/internal/"):
		return strings.TrimPrefix(pkg, module+"/internal/")
	}
	return strings.TrimPrefix(pkg, module+"/")
}

// listed resolves an imports column to the module's packages it names;
// words that name none (stdlib, modernc sqlite, numpy, ...) are outside
// the module and not checked. Parenthesised remarks are skipped.
func listed(col string, graph map[string][]string) []string {
	col = regexp.MustCompile(`\([^)]*\)`).ReplaceAllString(col, "")
	var pkgs []string
	for _, item := range strings.Split(col, ",") {
		w := strings.TrimSpace(item)
		for _, p := range []string{module + "/internal/" + w, module + "/" + w} {
			if w == "root" {
				p = module
			}
			if _, ok := graph[p]; ok && w != "" {
				pkgs = append(pkgs, p)
				break
			}
		}
	}
	slices.Sort(pkgs)
	return slices.Compact(pkgs)
}

func shortAll(pkgs []string) string {
	var s []string
	for _, p := range pkgs {
		s = append(s, short(p))
	}
	if len(s) == 0 {
		return "stdlib"
	}
	return strings.Join(s, ", ")
}

// TestImportRules keeps ARCHITECTURE.md's package table true: every
// package of the module under internal/ (and the root) has a row, and its
// "imports" column names exactly the module's packages it imports. It
// also checks the direction rules that need no table: nothing imports
// cmd/, the root imports nothing of the module, and nothing imports e2e or
// bench. Third-party libraries in the column are not checked.
func TestImportRules(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go tool not on PATH")
	}
	rows := readPackageTable(t)
	graph := moduleImports(t)
	byPkg := map[string]archRow{}
	for _, r := range rows {
		byPkg[r.pkg] = r
		if _, ok := graph[r.pkg]; !ok {
			t.Errorf("ARCHITECTURE.md:%d: the package table has a row for `%s`, but there is no such package; remove the row", r.line, r.name)
		}
	}
	var pkgs []string
	for p := range graph {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, p := range pkgs {
		deps := graph[p]
		for _, d := range deps {
			for _, top := range []string{"cmd", "e2e", "bench"} {
				if strings.HasPrefix(d, module+"/"+top+"/") || d == module+"/"+top {
					t.Errorf("%s imports %s: nothing may import %s/ (imports point from cmd down)", short(p), short(d), top)
				}
			}
		}
		if p != module && !strings.HasPrefix(p, module+"/internal/") {
			continue // cmd ("everything"), python/, e2e/, bench/
		}
		r, ok := byPkg[p]
		if !ok {
			t.Errorf("ARCHITECTURE.md's package table has no row for %s; add this row (and say what it does):\n| `%s` | ... | %s |", short(p), strings.TrimPrefix(p, module+"/"), shortAll(deps))
			continue
		}
		want := listed(r.imports, graph)
		var extra, missing []string
		for _, d := range deps {
			if !slices.Contains(want, d) {
				extra = append(extra, short(d))
			}
		}
		for _, d := range want {
			if !slices.Contains(deps, d) {
				missing = append(missing, short(d))
			}
		}
		if len(extra)+len(missing) > 0 {
			var why []string
			if len(extra) > 0 {
				why = append(why, "it imports "+strings.Join(extra, ", ")+", which the row does not list")
			}
			if len(missing) > 0 {
				why = append(why, "the row lists "+strings.Join(missing, ", ")+", which it does not import")
			}
			t.Errorf("ARCHITECTURE.md:%d: row `%s`: %s.\n  row says: %s\n  imports (module packages): %s", r.line, r.name, strings.Join(why, "; "), r.imports, shortAll(deps))
		}
	}
	if deps := graph[module]; len(deps) > 0 {
		t.Errorf("the root package imports %s: it is the vocabulary everything else imports, so it may import no package of the module", shortAll(deps))
	}
}
