package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
)

// TestHelpOneStyle runs --help on every command of the table, and on each
// form of a command with several (plugin vet, plugin test), and checks the
// one style: "Usage: leasehold " and the command's synopsis as the table
// lists it (its arguments included), a blank line, a description, then the
// flags, each as "--name value" (or "-n, --name value") with its
// environment twin on the next line. "leasehold help NAME" prints the same.
func TestHelpOneStyle(t *testing.T) {
	ctx := context.Background()
	flagLine := regexp.MustCompile(`^  (?:-[a-z], )?--([a-z][a-z0-9-]*)(?: \S+)?$`)
	type invocation struct {
		args  []string
		forms []string // what the Usage lines must show, after "leasehold "
	}
	var runs []invocation
	for _, c := range commands {
		forms := strings.Split(c.Synopsis, "\n")
		// The default command's synopsis marks its name optional; its
		// help names it.
		for i, f := range forms {
			forms[i] = strings.Replace(f, "[serve]", "serve", 1)
		}
		runs = append(runs, invocation{[]string{c.Name}, forms})
		if len(forms) > 1 {
			// A subcommand's help shows all of its own forms (plugin
			// replay has three).
			var order []string
			bySub := map[string][]string{}
			for _, f := range forms {
				// The form's command words: "plugin vet" of "plugin vet
				// FILE", "backup" of "backup [--force] FILE".
				words := strings.Fields(f)
				n := 1
				for n < len(words) && regexp.MustCompile(`^[a-z][a-z-]*$`).MatchString(words[n]) {
					n++
				}
				sub := strings.Join(words[:n], " ")
				if sub == c.Name {
					continue // the command's own form: its help shows them all, checked above
				}
				if bySub[sub] == nil {
					order = append(order, sub)
				}
				bySub[sub] = append(bySub[sub], f)
			}
			for _, sub := range order {
				runs = append(runs, invocation{strings.Fields(sub), bySub[sub]})
			}
		}
	}
	for _, r := range runs {
		name := strings.Join(r.args, " ")
		var stdout, stderr bytes.Buffer
		code := dispatch(ctx, append(append([]string{}, r.args...), "--help"), &stdout, &stderr)
		help := stdout.String() + stderr.String()
		if code != 0 {
			t.Errorf("%s --help: exit %d, want 0:\n%s", name, code, help)
			continue
		}
		lines := strings.Split(strings.TrimSuffix(help, "\n"), "\n")
		var want []string
		for i, f := range r.forms {
			prefix := "Usage: "
			if i > 0 {
				prefix = "       "
			}
			want = append(want, prefix+"leasehold "+f)
		}
		if len(lines) < len(want)+2 || strings.Join(lines[:len(want)], "\n") != strings.Join(want, "\n") {
			t.Errorf("%s --help does not start with its synopsis\n%s\n:\n%s", name, strings.Join(want, "\n"), help)
			continue
		}
		rest := lines[len(want):]
		if rest[0] != "" || rest[1] == "" || strings.HasPrefix(rest[1], "Flags") {
			t.Errorf("%s --help: no description paragraph after the synopsis:\n%s", name, help)
		}
		inFlags := false
		for i, line := range rest {
			if strings.HasPrefix(line, "Flags") {
				if line != "Flags (each also read from its environment variable):" || rest[i-1] != "" {
					t.Errorf("%s --help: flags header %q", name, line)
				}
				inFlags = true
				continue
			}
			if !inFlags || strings.HasPrefix(line, "    \t") {
				continue
			}
			m := flagLine.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("%s --help: flag line %q is not in the style \"  [-x, ]--name [value]\"", name, line)
				continue
			}
			env := "LEASEHOLD_" + strings.ToUpper(strings.ReplaceAll(m[1], "-", "_"))
			if i+1 >= len(rest) || !strings.HasPrefix(rest[i+1], "    \t") || !strings.Contains(rest[i+1], "(env "+env) {
				t.Errorf("%s --help: flag --%s is not followed by its description naming %s", name, m[1], env)
			}
		}

		var viaHelp bytes.Buffer
		if len(r.args) == 1 {
			if code := dispatch(ctx, []string{"help", r.args[0]}, &viaHelp, &viaHelp); code != 0 || viaHelp.String() != help {
				t.Errorf("leasehold help %s: exit %d, printed\n%s\nwant what %s --help prints", name, code, viaHelp.String(), name)
			}
		}
	}

	// The command list, three ways, names every command with its synopsis.
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		var stdout, stderr bytes.Buffer
		if code := dispatch(ctx, args, &stdout, &stderr); code != 0 || stderr.Len() != 0 {
			t.Errorf("leasehold %s: exit %d, stderr %q", args[0], code, stderr.String())
		}
		for _, c := range commands {
			for _, form := range strings.Split(c.Synopsis, "\n") {
				if !strings.Contains(stdout.String(), "  leasehold "+form) {
					t.Errorf("leasehold %s does not list %q:\n%s", args[0], form, stdout.String())
				}
			}
		}
	}
}
