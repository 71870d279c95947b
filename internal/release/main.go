package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "release:", err)
		}
		os.Exit(1)
	}
}

// commands are release's subcommands.
var commands = map[string]func(args []string, stdout, stderr io.Writer) error{
	"tag":   cmdTag,
	"api":   cmdAPI,
	"proxy": cmdProxy,
	"tidy":  cmdTidy,
}

const usage = `usage: release COMMAND [flags]

  tag [-dry-run] [-remote origin]  check the clone and tag every module at azq.Version
  api [-w]                         compare every module's API with the last release's (-w: write it)
  proxy -dir DIR                   write a module proxy of the clone's modules at azq.Version
  tidy                             go mod tidy in every module of go.work

Each takes -repo DIR, the clone (default: the current directory). docs/releasing.md has more.
`

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || commands[args[0]] == nil {
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	return commands[args[0]](args[1:], stdout, stderr)
}
