package main

// docs_map_test.go keeps the map a reader follows true, in the way
// TestEveryLogMessageIsCatalogued keeps the log catalogue: every source
// file has a row in DESIGN's file table, every section a comment or a
// document sends the reader to exists where it says, and every
// file:function pointer in the tour and the diagrams names a declaration
// of that file. A renamed function, a moved file or a retitled heading
// fails a test instead of leaving a learner at a dead end.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// mapDocs are the Markdown files whose pointers are checked: the docs
// that TestEveryDocLinkResolves reads, and the model's and the mutation
// check's text, which cite DESIGN's sections too.
func mapDocs(t *testing.T) []string {
	t.Helper()
	out := slices.Clone(docs)
	for _, pattern := range []string{"model/*.pml", "model/*.sh"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	return out
}

// TestEverySourceFileIsInDesignsFileTable fails when a file is added
// without a row in DESIGN's file table (the one after "Each file holds
// one stage"), or a row
// names a file that is gone: the table is where a reader looks up what
// a file is for.
func TestEverySourceFileIsInDesignsFileTable(t *testing.T) {
	listed := designFileTable(t)
	if len(listed) < 20 {
		t.Fatalf("DESIGN's file table lists only %d files; the table is gone or the scan is broken", len(listed))
	}
	sources, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range sources {
		if !strings.HasSuffix(f, "_test.go") && !slices.Contains(listed, f) {
			t.Errorf("%s is not in DESIGN's file table (\"Each file holds one stage\"); add a row saying what it holds", f)
		}
	}
	for _, f := range listed {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("DESIGN's file table names %s, which does not exist", f)
		}
	}
}

// designFileTable returns the files named in backticks in the first
// column of DESIGN's file table, the one after "Each file holds one
// stage".
func designFileTable(t *testing.T) []string {
	t.Helper()
	_, after, ok := strings.Cut(string(readDoc(t, "DESIGN.md")), "\nEach file holds one stage")
	if !ok {
		t.Fatal(`DESIGN.md has no "Each file holds one stage" table`)
	}
	name := regexp.MustCompile("`([^`]+\\.go)`")
	var files []string
	inTable := false
	for _, line := range strings.Split(after, "\n")[1:] {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(line, "|")
		for _, m := range name.FindAllStringSubmatch(cells[1], -1) {
			files = append(files, m[1])
		}
	}
	return files
}

// sectionPointer is how the code and the docs send a reader to a
// section by its title: README, "Logs"; DESIGN's "Design record to
// code"; DESIGN.md, "Before a release". The title must be a heading of
// that file, whole or up to a colon, so "When a worker dies" may name
// "When a worker dies: the policy's reasons", never a heading it only
// begins.
var sectionPointer = regexp.MustCompile(`\b(README|DESIGN|TOUR)(?:\.md)?(?:'s|,)\s+"([^"]+)"`)

// anchorPointer is a Markdown-style pointer written in a comment:
// DESIGN.md#who-owns-a-workers-state, never bench/README.md's.
var anchorPointer = regexp.MustCompile(`(?:^|[^/\w])(README|DESIGN|TOUR)\.md#([\w-]+)`)

// TestEverySectionAPointerNamesExists fails when a comment in a .go file,
// or the text of a doc, the model or the mutation check, names a section
// of README, DESIGN or TOUR that is not there: a heading renamed or moved
// to the other file. Links between the docs are TestEveryDocLinkResolves'.
func TestEverySectionAPointerNamesExists(t *testing.T) {
	texts := map[string]string{} // where → its comments or prose, spaces collapsed
	for _, pattern := range []string{"*.go", "bench/*.go"} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			texts[f] = goComments(t, f)
		}
	}
	for _, f := range mapDocs(t) {
		texts[f] = proseOf(string(readDoc(t, f)))
	}
	headings := map[string][]string{}
	for _, doc := range []string{"README", "DESIGN", "TOUR"} {
		headings[doc] = headingTitles(t, doc+".md")
	}
	checked := 0
	for where, text := range texts {
		for _, m := range sectionPointer.FindAllStringSubmatch(text, -1) {
			checked++
			title := strings.ReplaceAll(m[2], "`", "")
			if !slices.ContainsFunc(headings[m[1]], func(h string) bool {
				return h == title || strings.HasPrefix(h, title+":")
			}) {
				t.Errorf("%s points to %s's %q, which has no such section", where, m[1], m[2])
			}
		}
		for _, m := range anchorPointer.FindAllStringSubmatch(text, -1) {
			checked++
			if !slices.Contains(anchors(t, m[1]+".md"), m[2]) {
				t.Errorf("%s points to %s.md#%s, which has no heading with that anchor", where, m[1], m[2])
			}
		}
	}
	if checked < 8 {
		t.Errorf("found only %d section pointers; the scan is broken", checked)
	}
	t.Logf("checked %d section pointers", checked)
}

// goComments returns every comment of the Go file name as one line of
// text, so a title wrapped over two comment lines is still found.
func goComments(t *testing.T, name string) string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, g := range f.Comments {
		b.WriteString(g.Text())
		b.WriteString("\n\n")
	}
	return proseOf(b.String())
}

// commentMark is what begins a line of a shell or Promela comment.
var commentMark = regexp.MustCompile(`(?m)^\s*(?:#+|/?\*+/?|//)\s?`)

// proseOf joins a text's lines into one, dropping the marks that begin
// a comment line, so a title wrapped over two lines reads whole.
func proseOf(text string) string {
	return strings.Join(strings.Fields(commentMark.ReplaceAllString(text, "")), " ")
}

// headingTitles returns the text of every heading of the Markdown file
// name, backticks dropped.
func headingTitles(t *testing.T, name string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(stripCode(string(readDoc(t, name))), "\n") {
		if strings.HasPrefix(line, "#") {
			out = append(out, strings.ReplaceAll(strings.TrimSpace(strings.TrimLeft(line, "#")), "`", ""))
		}
	}
	return out
}

// filePointer is how the tour and DESIGN's diagrams name code: a file
// and a declaration in it, `worker.go:runWorker`,
// `barrier.go:Supervisor.barrier`. No line numbers, which go stale.
var filePointer = regexp.MustCompile(`\b([a-z][a-z0-9_]*\.go):([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)`)

// TestEveryFilePointerInTheTourAndTheDiagramsExists fails when TOUR.md or
// DESIGN.md names file.go:Name and file.go declares no Name (a function,
// a Type.method, a type, a constant or a variable): a rename or a move
// breaks the reading path here, not in a learner's hands.
func TestEveryFilePointerInTheTourAndTheDiagramsExists(t *testing.T) {
	declared := map[string][]string{} // file → its names
	checked := 0
	for _, doc := range []string{"TOUR.md", "DESIGN.md"} {
		for _, m := range filePointer.FindAllStringSubmatch(string(readDoc(t, doc)), -1) {
			file, name := m[1], m[2]
			checked++
			if _, err := os.Stat(file); err != nil {
				t.Errorf("%s names %s:%s, but there is no %s", doc, file, name, file)
				continue
			}
			if _, ok := declared[file]; !ok {
				declared[file] = declarations(t, file)
			}
			if !slices.Contains(declared[file], name) {
				t.Errorf("%s names %s:%s, which %s does not declare", doc, file, name, file)
			}
		}
	}
	if checked < 40 {
		t.Errorf("found only %d file:name pointers in TOUR.md and DESIGN.md; the tour is gone or the scan is broken", checked)
	}
	t.Logf("checked %d file:name pointers", checked)
}

// declarations returns every top-level name the Go file name declares:
// functions, methods as Type.method, types, constants and variables.
func declarations(t *testing.T, name string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil || len(d.Recv.List) == 0 {
				out = append(out, d.Name.Name)
				continue
			}
			out = append(out, receiverName(d.Recv.List[0].Type)+"."+d.Name.Name)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					out = append(out, s.Name.Name)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						out = append(out, n.Name)
					}
				}
			}
		}
	}
	return out
}

// receiverName is the type a method's receiver names, without its
// pointer or type parameters.
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// ownedTypes are the types whose every field DESIGN's "Who owns a
// worker's state" gives an owner, with the file that declares each.
var ownedTypes = map[string]string{
	"workerProc":   "supervisor.go",
	"Supervisor":   "supervisor.go",
	"servingSlots": "heal.go",
	"slotState":    "heal.go",
	"life":         "lifecycle.go",
	"startingGen":  "lifecycle.go",
	"Service":      "service.go",
}

// TestEveryFieldOfTheParentsStateHasAnOwner fails when a field is added
// to the state of a worker, a slot, a generation or the loop without a
// row in DESIGN's ownership tables: the table is only worth reading if
// it is whole. A mutex names itself, and is not asked for.
func TestEveryFieldOfTheParentsStateHasAnOwner(t *testing.T) {
	_, section, ok := strings.Cut(string(readDoc(t, "DESIGN.md")), "\n## Who owns a worker's state\n")
	if !ok {
		t.Fatal(`DESIGN.md has no "Who owns a worker's state" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`(\\w+)`").FindAllStringSubmatch(section, -1) {
		named[m[1]] = true
	}
	fields := 0
	for typ, file := range ownedTypes {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.TypeSpec)
			if !ok || spec.Name.Name != typ {
				return true
			}
			found = true
			for _, field := range spec.Type.(*ast.StructType).Fields.List {
				if isMutex(field.Type) {
					continue
				}
				for _, name := range field.Names {
					fields++
					if !named[name.Name] {
						t.Errorf("%s.%s (%s) has no owner in DESIGN's \"Who owns a worker's state\"", typ, name.Name, file)
					}
				}
			}
			return false
		})
		if !found {
			t.Errorf("%s declares no type %s", file, typ)
		}
	}
	if fields < 80 {
		t.Errorf("found only %d fields; the scan is broken", fields)
	}
}

// isMutex reports whether e is sync.Mutex or sync.RWMutex.
func isMutex(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "sync" && (sel.Sel.Name == "Mutex" || sel.Sel.Name == "RWMutex")
}

// TestEveryEventOfTheLoopIsInItsOneList fails when an event type of the
// lifecycle loop (a type named ev...) is declared anywhere but in
// lifecycle.go's one list, or has no case in run's switch: a reader
// learns every way the loop can be told something from that list.
func TestEveryEventOfTheLoopIsInItsOneList(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	eventName := regexp.MustCompile(`^ev[A-Z]`)
	listed := map[string]bool{}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.TYPE {
				continue
			}
			for _, spec := range gen.Specs {
				name := spec.(*ast.TypeSpec).Name.Name
				if !eventName.MatchString(name) {
					continue
				}
				if file != "lifecycle.go" || len(gen.Specs) < 2 {
					t.Errorf("event %s is declared in %s, not in lifecycle.go's list", name, file)
				}
				listed[name] = true
			}
		}
	}
	if len(listed) < 16 {
		t.Fatalf("found only %d event types; the scan is broken", len(listed))
	}
	handled := map[string]bool{}
	f, err := parser.ParseFile(token.NewFileSet(), "lifecycle.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		fn, ok := n.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "run" {
			return true
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if c, ok := n.(*ast.CaseClause); ok {
				for _, e := range c.List {
					if id, ok := e.(*ast.Ident); ok {
						handled[id.Name] = true
					}
				}
			}
			return true
		})
		return false
	})
	for name := range listed {
		if !handled[name] {
			t.Errorf("event %s has no case in lifecycle.go's run", name)
		}
	}
}
