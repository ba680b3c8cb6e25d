package main

import (
	"go/ast"
	"go/build"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// loggedMessages returns the message of every call that logs through
// log/slog in the package's non-test code: a *slog.Logger's Debug, Info,
// Warn, Error, their Context forms, Log and LogAttrs, and slog's own
// functions of those names. It type-checks the package, so a message
// from a constant, or from constants joined, is read as its value; a
// stage's name (want.String(), the barrier's prepared and ready) counts
// as every stage's. Any other message computed at run time is reported,
// since no catalogue could list it.
func loggedMessages(t *testing.T) []string {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		// This platform's files: they log every message the others do.
		if ok, err := build.Default.MatchFile(".", name); err != nil || !ok || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	if _, err := conf.Check("servery", fset, files, info); err != nil {
		t.Fatal(err)
	}
	var msgs []string
	add := func(msg string) {
		if !slices.Contains(msgs, msg) {
			msgs = append(msgs, msg)
		}
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			at, ok := slogMessageArg(call, info)
			if !ok || at >= len(call.Args) {
				return true
			}
			arg := call.Args[at]
			if tv := info.Types[arg]; tv.Value != nil && tv.Value.Kind() == constant.String {
				add(constant.StringVal(tv.Value))
				return true
			}
			if isStageName(arg, info) {
				for _, st := range []stage{stagePrepared, stageReady} {
					add(st.String())
				}
				return true
			}
			t.Errorf("%s: a log message computed at run time (%s), which no catalogue can list: log a constant message and put what varies in a field",
				fset.Position(arg.Pos()), types.ExprString(arg))
			return true
		})
	}
	return msgs
}

// slogMessageArg reports whether call logs through log/slog, and which
// argument is its message.
func slogMessageArg(call *ast.CallExpr, info *types.Info) (int, bool) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return 0, false
	}
	var fn *types.Func
	if s := info.Selections[sel]; s != nil {
		fn, _ = s.Obj().(*types.Func)
	} else {
		fn, _ = info.Uses[sel.Sel].(*types.Func)
	}
	if fn == nil || fn.Pkg() == nil || fn.Pkg().Path() != "log/slog" {
		return 0, false
	}
	if recv := fn.Type().(*types.Signature).Recv(); recv != nil && types.TypeString(recv.Type(), nil) != "*log/slog.Logger" {
		return 0, false
	}
	switch fn.Name() {
	case "Debug", "Info", "Warn", "Error":
		return 0, true
	case "DebugContext", "InfoContext", "WarnContext", "ErrorContext":
		return 1, true
	case "Log", "LogAttrs":
		return 2, true
	}
	return 0, false
}

// isStageName reports whether e is a stage's String(), the one message
// the code computes (the barrier logs each stage by its name).
func isStageName(e ast.Expr, info *types.Info) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "String" {
		return false
	}
	return types.TypeString(info.Types[sel.X].Type, nil) == "servery.stage"
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
		if name := m[1]; isMessageName(name) {
			names = append(names, name)
		}
	}
	return names
}

// isMessageName reports whether a phrase in backticks in the Logs
// section is a message: not a field (with =, or one word with _), a
// flag, a path, a file, a package, a method or a test's name.
func isMessageName(name string) bool {
	word := !strings.Contains(name, " ")
	switch {
	case strings.Contains(name, "="), strings.HasPrefix(name, "-"), strings.HasPrefix(name, "Test"):
		return false
	case word && (strings.ContainsAny(name, "_/.()[]") || strings.HasSuffix(name, ".go")):
		return false
	}
	return true
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
	// And every message the catalogue lists is still logged, but
	// net/http's own, which reach the log through the server's ErrorLog
	// and are listed so an operator can find them.
	for _, name := range names {
		if strings.HasPrefix(name, "http: ") {
			continue
		}
		found := slices.ContainsFunc(msgs, func(msg string) bool { return catalogued(msg, []string{name}) })
		if !found {
			t.Errorf("DESIGN.md's Logs section lists %q, which no code logs", name)
		}
	}
}
