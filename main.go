// Command servery serves a static site from one process, or from worker
// processes sharing one listener: a generation of them that starts all or
// nothing, whose lost workers are replaced in their slots, and which a
// reload replaces whole.
//
// This file is only the static site's entry point; the front end is in
// command.go. A program that vendors servery drops this file and calls
// Main with its own App.
package main

import (
	"flag"
	"os"
)

func main() {
	os.Exit(Main(newStaticApp(flag.CommandLine)))
}
