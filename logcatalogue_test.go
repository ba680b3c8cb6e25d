package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// loggedMessages returns the message of every Info, Warn and Error call
// in the package's non-test code whose message is a string literal, and,
// for one built as "literal" + name + "literal", a pattern with * for the
// name. Messages computed otherwise (a stage's name) are not seen.
func loggedMessages(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !slices.Contains([]string{"Info", "Warn", "Error"}, sel.Sel.Name) {
				return true
			}
			if msg, ok := messageOf(call.Args[0]); ok && !slices.Contains(msgs, msg) {
				msgs = append(msgs, msg)
			}
			return true
		})
	}
	return msgs
}

// messageOf is a literal message, or a pattern for literals joined with
// names.
func messageOf(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		l, lok := messageOf(e.X)
		r, rok := messageOf(e.Y)
		if e.Op != token.ADD || !lok && !rok {
			return "", false
		}
		if !lok {
			l = "*"
		}
		if !rok {
			r = "*"
		}
		return l + r, true
	}
	return "", false
}

// catalogue returns the messages DESIGN.md's Logs section names: each
// phrase in backticks in its list, whole, or as a prefix where it ends in
// "...", less the field names (with =, or one word with _) and flags.
func catalogue(t *testing.T) []string {
	t.Helper()
	_, text, _ := strings.Cut(string(readDoc(t, "DESIGN.md")), "\n## Logs\n")
	text, _, _ = strings.Cut(text, "\n## ")
	var names []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(strings.Join(strings.Fields(text), " "), -1) {
		if name := m[1]; !strings.Contains(name, "=") && !strings.HasPrefix(name, "-") && (strings.Contains(name, " ") || !strings.Contains(name, "_")) {
			names = append(names, name)
		}
	}
	return names
}

// catalogued reports whether msg (a pattern with *, perhaps) is in names.
func catalogued(msg string, names []string) bool {
	re := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(msg), `\*`, `.+`) + "$")
	for _, name := range names {
		if prefix, ok := strings.CutSuffix(name, " ..."); ok && strings.HasPrefix(msg, prefix) {
			return true
		}
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

func TestEveryLogMessageIsCatalogued(t *testing.T) {
	msgs, names := loggedMessages(t), catalogue(t)
	if len(msgs) < 50 || len(names) < 50 {
		t.Fatalf("%d messages in the code, %d in the catalogue; the scan is broken", len(msgs), len(names))
	}
	for _, msg := range msgs {
		if !catalogued(msg, names) {
			t.Errorf("the code logs %q, which DESIGN.md's Logs section does not list", msg)
		}
	}
	// And every multi-word phrase the catalogue lists is still logged.
	for _, name := range names {
		if !strings.Contains(name, " ") || strings.HasPrefix(name, "...") {
			continue
		}
		found := slices.ContainsFunc(msgs, func(msg string) bool { return catalogued(msg, []string{name}) })
		if !found {
			t.Errorf("DESIGN.md's Logs section lists %q, which no code logs", name)
		}
	}
}
