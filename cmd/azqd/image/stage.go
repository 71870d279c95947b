package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
)

// stageFS is the build stage's filesystem, on this machine: root, a
// temporary directory, stands for the stage's "/", and holds the stage's
// own directories, each an absolute path in the stage (WORKDIR /src, the
// output the final stage copies, /out). The base image's files are this
// machine's: its /bin/sh and its Go toolchain.
type stageFS struct {
	root string
	own  []string
}

// host is the path on this machine of p, an absolute path in one of the
// stage's own directories.
func (s *stageFS) host(p string) (string, error) {
	p = path.Clean(p)
	for _, d := range s.own {
		if p == d || strings.HasPrefix(p, d+"/") {
			return filepath.Join(s.root, filepath.FromSlash(p)), nil
		}
	}
	return "", fmt.Errorf("%s is not one of the build stage's own directories (%s)", p, strings.Join(s.own, ", "))
}

// addOwn makes dir, absolute, one of the stage's own directories.
func (s *stageFS) addOwn(dir string) {
	dir = path.Clean(dir)
	if _, err := s.host(dir); err != nil {
		s.own = append(s.own, dir)
	}
}

// A path is absolute where a '/' follows one of pathStarts or starts the
// text, and it ends before one of pathEnds.
const (
	pathStarts = " \t\n='\":(<>|;&`,"
	pathEnds   = " \t\n'\":;&|()<>`,"
)

// rewrite returns text, a RUN's command or an ENV's value, with each
// absolute path in one of the stage's own directories moved under root,
// where they are on this machine. Any other absolute path is refused: run
// outside a container, it would name this machine's file, not the
// stage's.
func (s *stageFS) rewrite(text string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(text); {
		if text[i] != '/' || (i > 0 && !strings.ContainsRune(pathStarts, rune(text[i-1]))) {
			b.WriteByte(text[i])
			i++
			continue
		}
		j := i
		for j < len(text) && !strings.ContainsRune(pathEnds, rune(text[j])) {
			j++
		}
		p := text[i:j]
		hp, err := s.host(p)
		if err != nil {
			return "", fmt.Errorf("it names %s: outside a container that would be this machine's; use the stage's own directories (%s) or relative paths", p, strings.Join(s.own, ", "))
		}
		if strings.HasSuffix(p, "/") {
			hp += "/"
		}
		b.WriteString(hp)
		i = j
	}
	return b.String(), nil
}

// platformEnvKeys are the variables of this machine's environment that
// change what go builds and that the golang base image does not set; the
// build stage starts without them, and with GOOS and GOARCH of the
// image's platform.
var platformEnvKeys = []string{"GOFLAGS", "GOEXPERIMENT", "GOWORK", "GOOS", "GOARCH"}

// baseEnv is the environment the build stage starts from, in place of
// its base image's: this machine's (where its Go toolchain, module cache
// and proxy are), less platformEnvKeys, with the platform's GOOS and
// GOARCH.
func baseEnv(goarch string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !slices.Contains(platformEnvKeys, k) {
			env = append(env, kv)
		}
	}
	return append(env, "GOOS=linux", "GOARCH="+goarch)
}

// runBuildStage carries out the build stage's instructions, in order, in
// a new temporary directory standing for the stage's filesystem (the
// caller removes stageFS.root): WORKDIR makes the directory; ARG takes
// its build argument from buildArgs, or its default; ENV and ARG set the
// environment its RUN steps get, ENV's value winning over ARG's as in
// docker build; COPY copies from the build context; RUN runs /bin/sh -c
// with its command, with the stage's own directories, in it and in the
// variables' values, rewritten to where they are here. outputs are the
// directories the final stage copies from, which are the stage's own
// from the start. It reports each step on progress, with a RUN's output
// as it comes, and returns the build arguments no ARG declared.
func runBuildStage(ctx context.Context, d *dockerfile, bc *buildContext, outputs []string, base []string, buildArgs map[string]string, progress io.Writer) (*stageFS, []string, error) {
	root, err := os.MkdirTemp("", "azqd-build-stage-")
	if err != nil {
		return nil, nil, err
	}
	s := &stageFS{root: root}
	for _, o := range outputs {
		s.addOwn(o)
	}
	var args []string // the stage's ARG, as the stage names paths
	var vars []string // the stage's ENV, likewise
	declared := map[string]bool{}
	workdir := ""
	for i, c := range d.build.Commands {
		fmt.Fprintf(progress, "image: build stage, step %d/%d: %s\n", i+1, len(d.build.Commands), oneLine(c))
		stageVars := slices.Clone(args)
		for _, kv := range vars {
			k, v, _ := strings.Cut(kv, "=")
			stageVars = setEnv(stageVars, k, v)
		}
		env := slices.Clone(base)
		for _, kv := range stageVars {
			k, v, _ := strings.Cut(kv, "=")
			env = setEnv(env, k, v)
		}
		if err := d.expand(c, env); err != nil {
			return s, nil, fmt.Errorf("%s: %v", at(c, strings.ToUpper(c.Name())), err)
		}
		var err error
		switch c := c.(type) {
		case *instructions.WorkdirCommand:
			p := c.Path
			if !path.IsAbs(p) {
				if workdir == "" {
					err = errNoWorkdir
					break
				}
				p = path.Join(workdir, p)
			}
			workdir = path.Clean(p)
			s.addOwn(workdir)
			var hp string
			if hp, err = s.host(workdir); err == nil {
				err = os.MkdirAll(hp, 0o755)
			}
		case *instructions.ArgCommand:
			for _, kv := range c.Args {
				declared[kv.Key] = true
				if v, ok := buildArgs[kv.Key]; ok {
					args = setEnv(args, kv.Key, v)
				} else if kv.Value != nil {
					args = setEnv(args, kv.Key, *kv.Value)
				}
			}
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				vars = setEnv(vars, kv.Key, kv.Value)
			}
		case *instructions.CopyCommand:
			err = s.copy(c, bc, workdir)
		case *instructions.RunCommand:
			start := time.Now()
			err = s.run(ctx, c, base, stageVars, workdir, progress)
			if err == nil {
				fmt.Fprintf(progress, "image: step %d done in %.1fs\n", i+1, time.Since(start).Seconds())
			}
		default:
			err = fmt.Errorf("the builder does not carry it out in the build stage")
		}
		if err != nil {
			return s, nil, fmt.Errorf("%s: %v", at(c, strings.ToUpper(c.Name())), err)
		}
	}
	var unused []string
	for k := range buildArgs {
		if !declared[k] {
			unused = append(unused, k)
		}
	}
	slices.Sort(unused)
	return s, unused, nil
}

// oneLine is a Dockerfile instruction as written, on one line and cut
// short, for progress reports.
func oneLine(c instructions.Command) string {
	code := strings.ToUpper(c.Name())
	if s, ok := c.(fmt.Stringer); ok {
		code = s.String()
	}
	code = strings.Join(strings.Fields(strings.ReplaceAll(code, "\\\n", " ")), " ")
	if r := []rune(code); len(r) > 120 {
		code = string(r[:117]) + "..."
	}
	return code
}

// errNoWorkdir refuses a relative path before the stage's first
// WORKDIR.
var errNoWorkdir = errors.New("no WORKDIR yet: the base image's working directory is not this machine's")

// copy carries out a COPY from the build context: each source, a file or
// a directory's contents, to the destination, which is a directory when
// it ends in a slash or is ".".
func (s *stageFS) copy(c *instructions.CopyCommand, bc *buildContext, workdir string) error {
	switch {
	case c.From != "" || c.Chown != "" || c.Chmod != "" || c.Link || c.Parents || len(c.ExcludePatterns) > 0:
		return fmt.Errorf("the build stage's COPY takes no options: it copies from the build context")
	case len(c.SourceContents) > 0:
		return fmt.Errorf("here-documents are not supported")
	}
	for _, src := range c.SourcePaths {
		if strings.ContainsAny(src, "*?[\\") {
			return fmt.Errorf("source %q: patterns are not supported", src)
		}
	}
	dest := c.DestPath
	intoDir := dest == "." || dest == "" || strings.HasSuffix(dest, "/")
	if len(c.SourcePaths) > 1 && !intoDir {
		return fmt.Errorf("with more than one source, the destination must be a directory and end with a /")
	}
	if !path.IsAbs(dest) {
		if workdir == "" {
			return errNoWorkdir
		}
		dest = path.Join(workdir, dest)
	}
	hp, err := s.host(dest)
	if err != nil {
		return err
	}
	for _, src := range c.SourcePaths {
		if err := bc.copyTo(src, hp, intoDir); err != nil {
			return err
		}
	}
	return nil
}

// run carries out a RUN in its shell form: /bin/sh -c with the command,
// rewritten, in the working directory, with base and the stage's ARG
// and ENV, vars. The command's output goes to progress, each line
// indented, as it comes; on a failure the error holds it too.
func (s *stageFS) run(ctx context.Context, c *instructions.RunCommand, base, vars []string, workdir string, progress io.Writer) error {
	switch {
	case len(c.FlagsUsed) > 0:
		return fmt.Errorf("options %q are not supported", c.FlagsUsed)
	case len(c.Files) > 0:
		return fmt.Errorf("here-documents are not supported")
	case !c.PrependShell:
		return fmt.Errorf("the exec form is not supported: write the command for /bin/sh -c")
	case workdir == "":
		return errNoWorkdir
	}
	cmdline, err := s.rewrite(strings.Join(c.CmdLine, " "))
	if err != nil {
		return err
	}
	env := slices.Clone(base)
	for _, kv := range vars {
		k, v, _ := strings.Cut(kv, "=")
		if v, err = s.rewrite(v); err != nil {
			return fmt.Errorf("ENV %s: %v", k, err)
		}
		env = setEnv(env, k, v)
	}
	dir, err := s.host(workdir)
	if err != nil {
		return err
	}
	sh := exec.CommandContext(ctx, "/bin/sh", "-c", cmdline)
	sh.Dir, sh.Env = dir, env
	var out bytes.Buffer
	shown := &indenter{w: progress, indent: "    "}
	sh.Stdout = io.MultiWriter(&out, shown)
	sh.Stderr = sh.Stdout
	err = sh.Run()
	shown.flush()
	if err != nil {
		return fmt.Errorf("%v\n%s", err, out.Bytes())
	}
	return nil
}

// indenter writes each line written to it to w, after indent; a last
// line without a newline waits for flush.
type indenter struct {
	w       io.Writer
	indent  string
	pending []byte // the line begun and not ended yet
}

func (in *indenter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			in.pending = append(in.pending, p...)
			break
		}
		line := append(in.pending, p[:i+1]...)
		in.pending = nil
		if _, err := fmt.Fprintf(in.w, "%s%s", in.indent, line); err != nil {
			return n, err
		}
		p = p[i+1:]
	}
	return n, nil
}

// flush writes the line begun, if any.
func (in *indenter) flush() {
	if len(in.pending) > 0 {
		fmt.Fprintf(in.w, "%s%s\n", in.indent, in.pending)
		in.pending = nil
	}
}
