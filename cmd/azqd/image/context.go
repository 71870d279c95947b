package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// buildContext is what docker build sends from the repository's root:
// every file that .dockerignore does not leave out, read with the parser
// and matcher docker build uses.
type buildContext struct {
	root string
	pm   *patternmatcher.PatternMatcher
}

// openContext is the build context at root, with root's .dockerignore,
// if it has one.
func openContext(root string) (*buildContext, error) {
	var patterns []string
	f, err := os.Open(filepath.Join(root, ".dockerignore"))
	switch {
	case err == nil:
		patterns, err = ignorefile.ReadAll(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf(".dockerignore: %v", err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		return nil, fmt.Errorf(".dockerignore: %v", err)
	}
	return &buildContext{root: root, pm: pm}, nil
}

// sent reports whether docker build sends rel (slash-separated, relative
// to the context's root) in the build context.
func (c *buildContext) sent(rel string) (bool, error) {
	if rel == "." {
		return true, nil
	}
	excluded, err := c.pm.MatchesOrParentMatches(filepath.FromSlash(rel))
	return !excluded, err
}

// copyTo copies src, a slash-separated path in the context, to dst on
// this machine as COPY does: a directory's contents, less what the
// context leaves out, into the directory dst; a file to dst, or into dst
// when intoDir. Modes and symbolic links are kept.
func (c *buildContext) copyTo(src, dst string, intoDir bool) error {
	src = path.Clean(src)
	if src == ".." || strings.HasPrefix(src, "../") || path.IsAbs(src) {
		return fmt.Errorf("%s is outside the build context", src)
	}
	if ok, err := c.sent(src); err != nil || !ok {
		return fmt.Errorf("%s: not in the build context (.dockerignore leaves it out)", src)
	}
	fi, err := os.Lstat(filepath.Join(c.root, filepath.FromSlash(src)))
	if err != nil {
		return fmt.Errorf("%s: not in the build context: %v", src, err)
	}
	if !fi.IsDir() {
		if intoDir {
			dst = filepath.Join(dst, path.Base(src))
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return copyEntry(filepath.Join(c.root, filepath.FromSlash(src)), dst, fi)
	}
	return filepath.WalkDir(filepath.Join(c.root, filepath.FromSlash(src)), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(c.root, p)
		if err != nil {
			return err
		}
		ok, err := c.sent(filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		if !ok {
			// A directory left out may still hold files that a "!"
			// pattern sends.
			if d.IsDir() && !c.pm.Exclusions() {
				return filepath.SkipDir
			}
			return nil
		}
		under, err := filepath.Rel(filepath.Join(c.root, filepath.FromSlash(src)), p)
		if err != nil {
			return err
		}
		if under == "." {
			// The directory's contents are copied, not the directory:
			// dst keeps its mode if it exists.
			return os.MkdirAll(dst, 0o755)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		return copyEntry(p, filepath.Join(dst, under), fi)
	})
}

// copyEntry copies the file, directory (not its contents) or symbolic
// link from, whose information is fi, to to, with its mode.
func copyEntry(from, to string, fi fs.FileInfo) error {
	switch {
	case fi.IsDir():
		if err := os.MkdirAll(to, 0o755); err != nil {
			return err
		}
		return os.Chmod(to, fi.Mode().Perm())
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(from)
		if err != nil {
			return err
		}
		if err := removeFile(to); err != nil {
			return err
		}
		return os.Symlink(target, to)
	case fi.Mode().IsRegular():
		b, err := os.ReadFile(from)
		if err != nil {
			return err
		}
		if err := removeFile(to); err != nil {
			return err
		}
		if err := os.WriteFile(to, b, fi.Mode().Perm()); err != nil {
			return err
		}
		return os.Chmod(to, fi.Mode().Perm())
	default:
		return fmt.Errorf("%s: not a file, directory or symbolic link", from)
	}
}

// removeFile removes the file or link at p, which a copy replaces, if
// there is one.
func removeFile(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
