package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Func runs one command with the arguments after its name and returns
// the process exit code (ExitOK, ExitFailure, ExitUsage or a
// command-specific code).
type Func func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// Exit codes every command shares.
const (
	ExitOK      = 0
	ExitFailure = 1 // the command ran and failed
	ExitUsage   = 2 // bad flags or arguments; nothing was done
)

// Command is one entry in leasehold's table of commands.
type Command struct {
	// Name is the word after "leasehold" that selects the command.
	Name string
	// Synopsis is the command line after "leasehold", one line per form,
	// e.g. "backup [--data-dir D] FILE".
	Synopsis string
	// Summary says what the command does, in the command list.
	Summary string
	Run     Func
}

// summaryColumn is where summaries start in the command list; a synopsis
// too long to leave room puts its summary on the next line.
const summaryColumn = 30

// WriteList writes the command list of "leasehold help": each form of
// each command, then its summary.
func WriteList(w io.Writer, commands []Command) {
	for _, c := range commands {
		forms := strings.Split(c.Synopsis, "\n")
		for i, form := range forms {
			line := "  leasehold " + form
			if i < len(forms)-1 {
				fmt.Fprintln(w, line)
				continue
			}
			summary := strings.Split(c.Summary, "\n")
			if len(line) < summaryColumn-1 {
				fmt.Fprintf(w, "%-*s%s\n", summaryColumn, line, summary[0])
			} else {
				fmt.Fprintf(w, "%s\n%*s%s\n", line, summaryColumn, "", summary[0])
			}
			for _, more := range summary[1:] {
				fmt.Fprintf(w, "%*s%s\n", summaryColumn, "", more)
			}
		}
	}
}

// Lookup returns the command called name.
func Lookup(commands []Command, name string) (Command, bool) {
	for _, c := range commands {
		if c.Name == name {
			return c, true
		}
	}
	return Command{}, false
}
