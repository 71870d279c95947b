package main

import (
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
)

// dockerfile is a Dockerfile of the two stages this builder carries out,
// as BuildKit's parser (docker build's) reads it: a build stage, whose
// instructions run on this machine (runBuildStage), and a final stage
// FROM scratch, made of layers copied from the build stage and a
// configuration (finalStage). An instruction the builder would not carry
// out as a container engine does is an error, never skipped.
type dockerfile struct {
	lex          *shell.Lex
	build, final instructions.Stage
}

// readDockerfile parses a Dockerfile and checks its stages' shape.
func readDockerfile(r io.Reader) (*dockerfile, error) {
	res, err := parser.Parse(r)
	if err != nil {
		return nil, err
	}
	stages, metaArgs, err := instructions.Parse(res.AST, nil)
	if err != nil {
		return nil, err
	}
	if len(metaArgs) > 0 {
		return nil, fmt.Errorf("%s: build arguments are not supported", at(&metaArgs[0], "ARG"))
	}
	if len(stages) != 2 {
		return nil, fmt.Errorf("%d stages; the builder carries out two: a build stage and a final stage FROM scratch", len(stages))
	}
	d := &dockerfile{lex: shell.NewLex(res.EscapeToken), build: stages[0], final: stages[1]}
	for _, s := range stages {
		if s.Platform != "" {
			return nil, fmt.Errorf("line %d: FROM --platform is not supported: the builder builds for GOARCH", line(s.Location))
		}
	}
	if d.build.Name == "" {
		return nil, fmt.Errorf("line %d: the build stage has no name (FROM … AS name) for the final stage to copy from", line(d.build.Location))
	}
	if !strings.EqualFold(d.final.BaseName, "scratch") {
		return nil, fmt.Errorf("line %d: the final stage is FROM %s; the builder makes images FROM scratch", line(d.final.Location), d.final.BaseName)
	}
	return d, nil
}

// line is the first line of a location in the Dockerfile.
func line(loc []parser.Range) int {
	if len(loc) == 0 {
		return 0
	}
	return loc[0].Start.Line
}

// at names an instruction for an error: its line and its name.
func at(c instructions.Command, name string) string {
	return fmt.Sprintf("line %d: %s", line(c.Location()), name)
}

// expand replaces the variables in c's words from env, as a container
// engine does before it carries c out.
func (d *dockerfile) expand(c instructions.Command, env []string) error {
	e, ok := c.(instructions.SupportsSingleWordExpansion)
	if !ok {
		return nil
	}
	return e.Expand(func(word string) (string, error) {
		s, _, err := d.lex.ProcessWord(word, shell.EnvsFromSlice(env))
		return s, err
	})
}

// setEnv sets k=v in env, in the place k has if it has one.
func setEnv(env []string, k, v string) []string {
	for i, kv := range env {
		if key, _, _ := strings.Cut(kv, "="); shell.EqualEnvKeys(key, k) {
			env[i] = k + "=" + v
			return env
		}
	}
	return append(env, k+"="+v)
}

// defaultPath is the PATH BuildKit gives a stage FROM scratch until an
// ENV sets it.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// layerCopy is a COPY --from of the final stage: a layer of src, an
// absolute path in the build stage, at dest in the image, every entry
// owned by uid:gid.
type layerCopy struct {
	src, dest string
	uid, gid  int
	// createdBy is the instruction as written, for the image's history.
	createdBy string
}

// finalStage is what the final stage makes: its layers, in order, and
// the image's configuration.
type finalStage struct {
	copies []layerCopy
	config v1.Config
}

var portRE = regexp.MustCompile(`^[0-9]+(/(tcp|udp|sctp))?$`)

// finalStage reads the final stage's instructions into its layers and
// configuration.
func (d *dockerfile) finalStage() (*finalStage, error) {
	f := &finalStage{config: v1.Config{ExposedPorts: map[string]struct{}{}, Labels: map[string]string{}}}
	env := []string{"PATH=" + defaultPath}
	for _, c := range d.final.Commands {
		if err := d.expand(c, env); err != nil {
			return nil, fmt.Errorf("%s: %v", at(c, c.Name()), err)
		}
		switch c := c.(type) {
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				env = setEnv(env, kv.Key, kv.Value)
			}
		case *instructions.CopyCommand:
			lc, err := d.layerCopy(c)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", at(c, "COPY"), err)
			}
			f.copies = append(f.copies, lc)
		case *instructions.UserCommand:
			f.config.User = c.User
		case *instructions.ExposeCommand:
			for _, p := range c.Ports {
				ps, err := d.lex.ProcessWords(p, shell.EnvsFromSlice(env))
				if err != nil {
					return nil, fmt.Errorf("%s: %v", at(c, "EXPOSE"), err)
				}
				for _, p := range ps {
					if !portRE.MatchString(p) {
						return nil, fmt.Errorf("%s: port %q: want a port number, and /tcp, /udp or /sctp", at(c, "EXPOSE"), p)
					}
					if !strings.Contains(p, "/") {
						p += "/tcp"
					}
					f.config.ExposedPorts[p] = struct{}{}
				}
			}
		case *instructions.LabelCommand:
			for _, kv := range c.Labels {
				f.config.Labels[kv.Key] = kv.Value
			}
		case *instructions.HealthCheckCommand:
			h := c.Health
			if h.StartInterval != 0 {
				return nil, fmt.Errorf("%s: --start-interval is not supported", at(c, "HEALTHCHECK"))
			}
			f.config.Healthcheck = &v1.HealthConfig{Test: h.Test, Interval: h.Interval, Timeout: h.Timeout, StartPeriod: h.StartPeriod, Retries: h.Retries}
		case *instructions.CmdCommand:
			if c.PrependShell || len(c.Files) > 0 {
				return nil, fmt.Errorf("%s: shell form; a scratch image has no shell: write CMD [\"program\", \"arg\", …]", at(c, "CMD"))
			}
			f.config.Cmd = c.CmdLine
		default:
			return nil, fmt.Errorf("%s in the final stage: the builder does not carry it out", at(c, strings.ToUpper(c.Name())))
		}
	}
	f.config.Env = env
	return f, nil
}

// layerCopy reads a COPY of the final stage, which copies one absolute
// path of the build stage to one absolute path in the image.
func (d *dockerfile) layerCopy(c *instructions.CopyCommand) (layerCopy, error) {
	lc := layerCopy{createdBy: c.String()}
	switch {
	case !strings.EqualFold(c.From, d.build.Name):
		return lc, fmt.Errorf("--from=%q: the final stage copies from the build stage, %q, alone", c.From, d.build.Name)
	case c.Chmod != "" || c.Link || c.Parents || len(c.ExcludePatterns) > 0 || len(c.SourceContents) > 0:
		return lc, fmt.Errorf("only --from and --chown are supported")
	case len(c.SourcePaths) != 1 || !path.IsAbs(c.SourcePaths[0]) || path.Clean(c.SourcePaths[0]) == "/":
		return lc, fmt.Errorf("sources %q: want one absolute path below the build stage's /", c.SourcePaths)
	case !path.IsAbs(c.DestPath) || path.Dir(path.Clean(c.DestPath)) != "/":
		return lc, fmt.Errorf("destination %q: want a directory or file at the image's root, such as /usr/", c.DestPath)
	}
	lc.src, lc.dest = c.SourcePaths[0], c.DestPath
	if c.Chown != "" {
		var err error
		if lc.uid, lc.gid, err = owner(c.Chown); err != nil {
			return lc, fmt.Errorf("--chown: %v (a scratch image has no user names)", err)
		}
	}
	return lc, nil
}

// sources are the build stage's directories the final stage copies
// from: the first element of each copy's source path ("/out").
func (f *finalStage) sources() []string {
	var dirs []string
	for _, c := range f.copies {
		first, _, _ := strings.Cut(strings.TrimPrefix(path.Clean(c.src), "/"), "/")
		dirs = append(dirs, "/"+first)
	}
	return dirs
}
