package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// EnvPrefix is the prefix of every flag's environment twin.
const EnvPrefix = "LEASEHOLD_"

// EnvName returns the environment twin of a flag: data-dir ->
// LEASEHOLD_DATA_DIR.
func EnvName(flagName string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// FlagSet is a flag.FlagSet that parses with environment twins and prints
// --help in leasehold's one style:
//
//	Usage: leasehold leader --lease NAME [flags]
//
//	<about>
//
//	Flags (each also read from its environment variable):
//	  -n, --namespace name
//	    	namespace of the lease (env LEASEHOLD_NAMESPACE, default "default")
type FlagSet struct {
	*flag.FlagSet
	synopsis, about string
	// shortFor maps a long flag name to its one-letter alias; isAlias
	// marks the aliases, which have no environment twin of their own.
	shortFor map[string]string
	isAlias  map[string]bool
}

// NewFlagSet returns the flag set of "leasehold <synopsis>"; its name, which
// prefixes its errors, is "leasehold" and the synopsis's leading lower-case
// words ("plugin vet" of "plugin vet FILE.wasm"; a synopsis of several
// forms, one per line, gets the words they share). about, when set, is
// printed by --help between the synopsis and the flags. Errors and help go
// to stderr.
func NewFlagSet(synopsis, about string, stderr io.Writer) *FlagSet {
	name := ""
	for i, form := range strings.Split(synopsis, "\n") {
		if n := commandWords(form); i == 0 {
			name = n
		} else {
			name = commonWords(name, n)
		}
	}
	name = strings.TrimSpace("leasehold " + name)
	fs := &FlagSet{
		FlagSet:  flag.NewFlagSet(name, flag.ContinueOnError),
		synopsis: "leasehold " + synopsis,
		about:    strings.TrimSpace(about),
		shortFor: map[string]string{},
		isAlias:  map[string]bool{},
	}
	fs.SetOutput(stderr)
	fs.Usage = fs.printUsage
	return fs
}

// commandWords returns the leading lower-case words of a synopsis form:
// "plugin vet" of "plugin vet FILE.wasm".
func commandWords(form string) string {
	var words []string
	for _, word := range strings.Fields(form) {
		if strings.TrimLeft(word, "abcdefghijklmnopqrstuvwxyz") != "" {
			break
		}
		words = append(words, word)
	}
	return strings.Join(words, " ")
}

// commonWords returns the words a and b start with: "plugin" of "plugin
// vet" and "plugin test".
func commonWords(a, b string) string {
	wa, wb := strings.Fields(a), strings.Fields(b)
	n := 0
	for n < len(wa) && n < len(wb) && wa[n] == wb[n] {
		n++
	}
	return strings.Join(wa[:n], " ")
}

// Alias makes -short another name for the registered flag --long.
func (fs *FlagSet) Alias(short, long string) {
	f := fs.Lookup(long)
	if f == nil {
		panic("cli: alias -" + short + " for unregistered flag --" + long)
	}
	fs.Var(f.Value, short, "alias of --"+long)
	fs.shortFor[long], fs.isAlias[short] = short, true
}

// Parse applies the environment twins as defaults, so that flags on the
// command line win, then parses args. --help and -h return flag.ErrHelp
// after printing the usage.
func (fs *FlagSet) Parse(args []string) error {
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if fs.isAlias[f.Name] || envErr != nil {
			return
		}
		if v, ok := os.LookupEnv(EnvName(f.Name)); ok {
			if err := f.Value.Set(v); err != nil {
				envErr = fmt.Errorf("invalid value %q for %s: %w", v, EnvName(f.Name), err)
			}
		}
	})
	if envErr != nil {
		return envErr
	}
	return fs.parseFlags(args)
}

// parseFlags runs flag.FlagSet.Parse with its own printing turned off:
// the flag package prints a bad flag's error followed by the whole usage,
// which scrolls the error away. --help still prints the usage; an error is
// left to Stop (or the caller), which prints it with one line on where the
// help is.
func (fs *FlagSet) parseFlags(args []string) error {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.FlagSet.Parse(args)
	fs.SetOutput(out)
	fs.Usage = fs.printUsage
	if errors.Is(err, flag.ErrHelp) {
		fs.printUsage()
	}
	return err
}

// ParseWithArg parses args that hold exactly one positional argument
// (what names it in errors, e.g. "FILE"), before, between or after the
// flags.
func (fs *FlagSet) ParseWithArg(args []string, what string) (string, error) {
	pos, err := fs.ParseInterspersed(args)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", errors.New("expected exactly one " + what)
	}
	return pos[0], nil
}

// ParseInterspersed parses args whose positional arguments may stand
// before, between or after the flags (as the docs write "plugin test
// FILE.wasm INPUT.json --input X" or "backup --force FILE"), and returns
// the positional arguments in order. Everything after "--" is positional.
func (fs *FlagSet) ParseInterspersed(args []string) ([]string, error) {
	if err := fs.Parse(nil); err != nil { // the environment twins, once
		return nil, err
	}
	var pos []string
	for len(args) > 0 {
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		if args[0] == "" || args[0][0] != '-' || args[0] == "-" {
			pos, args = append(pos, args[0]), args[1:]
			continue
		}
		if err := fs.parseFlags(args); err != nil {
			return nil, err
		}
		rest := fs.FlagSet.Args()
		// flag.Parse stops at the first positional argument, or drops a
		// "--" and stops after it: then the rest is all positional.
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		args = rest
	}
	return pos, nil
}

// ParseNoArgs parses args that hold flags only.
func (fs *FlagSet) ParseNoArgs(args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return nil
}

// printUsage is the one --help style of every command.
func (fs *FlagSet) printUsage() {
	w := fs.Output()
	// A command with several forms ("plugin vet ...", "plugin test ...")
	// lists each under the first.
	fmt.Fprintf(w, "Usage: %s\n", strings.ReplaceAll(fs.synopsis, "\n", "\n       leasehold "))
	if fs.about != "" {
		fmt.Fprintf(w, "\n%s\n", fs.about)
	}
	header := false
	fs.VisitAll(func(f *flag.Flag) {
		if fs.isAlias[f.Name] {
			return
		}
		if !header {
			fmt.Fprintf(w, "\nFlags (each also read from its environment variable):\n")
			header = true
		}
		names := "--" + f.Name
		if short, ok := fs.shortFor[f.Name]; ok {
			names = "-" + short + ", " + names
		}
		arg, usage := flag.UnquoteUsage(f)
		if arg != "" {
			names += " " + arg
		}
		fmt.Fprintf(w, "  %s\n    \t%s (env %s", names, usage, EnvName(f.Name))
		if d := f.DefValue; d != "" && d != "false" && d != "0" && d != "0s" {
			fmt.Fprintf(w, ", default %q", d)
		}
		fmt.Fprintln(w, ")")
	})
}

// HelpHint is the one line printed under a usage error of the command
// called name ("leasehold serve"): where its help is, instead of the whole
// help, so that the error stays on screen.
func HelpHint(name string) string {
	return "Run '" + name + " --help' for usage."
}

// Stop turns the outcome of parsing into the exit code of a command that
// stops there: ExitOK after --help, ExitUsage for bad usage, with the error
// on stderr (prefixed by the command's name) and HelpHint under it. stop is
// false when parsing succeeded and the command goes on.
func (fs *FlagSet) Stop(err error) (code int, stop bool) {
	switch {
	case err == nil:
		return ExitOK, false
	case errors.Is(err, flag.ErrHelp):
		return ExitOK, true
	}
	fmt.Fprintf(fs.Output(), "%s: %v\n%s\n", fs.Name(), err, HelpHint(fs.Name()))
	return ExitUsage, true
}
