package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestEveryTestTheReadmeNamesExists keeps the map from claims to tests
// from rotting: every test, fuzz target and benchmark the README names in
// backticks must be a function in one of the package's test files.
func TestEveryTestTheReadmeNamesExists(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	funcs := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)\w+)\(`)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range funcs.FindAllSubmatch(src, -1) {
			defined[string(m[1])] = true
		}
	}
	var missing []string
	named := regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Z0-9]\\w*)[^`]*`")
	for _, m := range named.FindAllStringSubmatch(string(readme), -1) {
		if !defined[m[1]] && !slices.Contains(missing, m[1]) {
			missing = append(missing, m[1])
		}
	}
	if len(missing) > 0 {
		t.Errorf("README.md names tests that do not exist: %s", strings.Join(missing, ", "))
	}
	if len(defined) < 100 {
		t.Errorf("found only %d test functions; the scan is broken", len(defined))
	}
}
