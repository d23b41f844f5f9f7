package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Program is a binary's table of commands (as bbolt's command root is):
// its dispatch, and what "leasehold help" prints around the list.
type Program struct {
	// Commands in the order the help lists them.
	Commands []Command
	// Default is the command that runs when the first argument is a flag,
	// or when there is none.
	Default string
	// Intro and Outro are printed before and after the command list.
	Intro, Outro string
}

// Dispatch runs one command line and returns the process exit code.
// "leasehold --help" asks about leasehold, not about the default command:
// it lists the commands, as "leasehold help" does; "leasehold help NAME"
// is "leasehold NAME --help".
func (p Program) Dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "--help" || args[0] == "-h") {
		args = []string{"help"}
	}
	name := p.Default
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if name == "help" {
		if len(args) == 1 {
			if cmd, ok := Lookup(p.Commands, args[0]); ok {
				return cmd.Run(ctx, []string{"--help"}, stdout, stderr)
			}
		}
		p.usage(stdout)
		return ExitOK
	}
	cmd, ok := Lookup(p.Commands, name)
	if !ok {
		fmt.Fprintf(stderr, "leasehold: unknown command %q\n\n", name)
		p.usage(stderr)
		return ExitUsage
	}
	return cmd.Run(ctx, args, stdout, stderr)
}

// RunsDefault reports whether args run the default command.
func (p Program) RunsDefault(args []string) bool {
	return len(args) == 0 || strings.HasPrefix(args[0], "-") || args[0] == p.Default
}

func (p Program) usage(w io.Writer) {
	fmt.Fprint(w, p.Intro)
	WriteList(w, p.Commands)
	fmt.Fprint(w, p.Outro)
}
