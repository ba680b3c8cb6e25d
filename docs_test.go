package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// docs are the Markdown files that name tests and link to each other: the
// user's manual, the auditor's map, the learner's tour and the
// benchmarks' figures.
var docs = []string{"README.md", "DESIGN.md", "TOUR.md", "bench/README.md"}

// TestEveryTestTheDocsNameExists keeps the map from claims to tests from
// rotting: every test, fuzz target and benchmark the docs name in
// backticks must be a function in one of the package's test files, or
// the bench's.
func TestEveryTestTheDocsNameExists(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	benchFiles, _ := filepath.Glob("bench/*_test.go") // the bench's own tests, which its README names
	files = append(files, benchFiles...)
	defined := map[string]bool{}
	funcs := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)\w+)\(`)
	for _, f := range files {
		for _, m := range funcs.FindAllSubmatch(readDoc(t, f), -1) {
			defined[string(m[1])] = true
		}
	}
	if len(defined) < 100 {
		t.Fatalf("found only %d test functions; the scan is broken", len(defined))
	}
	named := regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Z0-9]\\w*)[^`]*`")
	total := 0
	for _, doc := range docs {
		var missing []string
		for _, m := range named.FindAllStringSubmatch(string(readDoc(t, doc)), -1) {
			total++
			if !defined[m[1]] && !slices.Contains(missing, m[1]) {
				missing = append(missing, m[1])
			}
		}
		if len(missing) > 0 {
			t.Errorf("%s names tests that do not exist: %s", doc, strings.Join(missing, ", "))
		}
	}
	if total < 100 {
		t.Errorf("the docs name only %d tests; the claims map is gone or the scan is broken", total)
	}
}

// TestEveryDocLinkResolves requires every relative link in the docs to
// name a file that exists, and every #anchor a heading of the file it
// points into, as GitHub makes anchors from headings.
func TestEveryDocLinkResolves(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	checked := 0
	for _, doc := range docs {
		for _, m := range link.FindAllStringSubmatch(stripCode(string(readDoc(t, doc))), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path, anchor, _ := strings.Cut(target, "#")
			file := doc
			if path != "" {
				file = filepath.Join(filepath.Dir(doc), path)
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s links to %s, which does not exist", doc, target)
					continue
				}
			}
			if anchor != "" && !slices.Contains(anchors(t, file), anchor) {
				t.Errorf("%s links to %s: %s has no heading with that anchor", doc, target, file)
			}
		}
	}
	if checked < 10 {
		t.Errorf("checked only %d links; the scan is broken", checked)
	}
}

func TestAnchorsAreGitHubs(t *testing.T) {
	for heading, want := range map[string]string{
		"## Embedding your own handler":                "embedding-your-own-handler",
		"### Leaving a load balancer: -shutdown-delay": "leaving-a-load-balancer--shutdown-delay",
		"### The sequence of generations (reload.pml)": "the-sequence-of-generations-reloadpml",
		"## When a worker dies: the policy's reasons":  "when-a-worker-dies-the-policys-reasons",
		"## Reloads: `bench/reload.sh`":                "reloads-benchreloadsh",
		"### Model step → Go":                          "model-step--go",
	} {
		if got := anchorOf(heading); got != want {
			t.Errorf("anchorOf(%q) = %q; want %q", heading, got, want)
		}
	}
}

func readDoc(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// anchors returns the anchors of every heading in the Markdown file name,
// with GitHub's -1, -2 for repeated ones.
func anchors(t *testing.T, name string) []string {
	var out []string
	seen := map[string]int{}
	for _, line := range strings.Split(stripCode(string(readDoc(t, name))), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		a := anchorOf(line)
		if n := seen[a]; n > 0 {
			out = append(out, a+"-"+strconv.Itoa(n))
		} else {
			out = append(out, a)
		}
		seen[a]++
	}
	return out
}

// anchorOf is GitHub's anchor for a heading line: lower case, letters,
// digits, spaces, hyphens and underscores kept, spaces made hyphens.
func anchorOf(heading string) string {
	text := strings.TrimSpace(strings.TrimLeft(heading, "#"))
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// stripCode blanks fenced code blocks, whose lines are neither headings
// nor links.
func stripCode(md string) string {
	lines := strings.Split(md, "\n")
	fenced := false
	for i, line := range lines {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			lines[i] = ""
		} else if fenced {
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}
