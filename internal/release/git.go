package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
)

// git runs git in dir and returns its output without its final newline.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimRight(string(out), "\n"), nil
}

// tagExists reports whether the clone at dir has the tag.
func tagExists(dir, tag string) (bool, error) {
	cmd := exec.Command("git", "rev-parse", "-q", "--verify", "refs/tags/"+tag)
	cmd.Dir = dir
	err := cmd.Run()
	if err == nil {
		return true, nil
	}
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
		return false, nil
	}
	return false, fmt.Errorf("git rev-parse refs/tags/%s: %v", tag, err)
}

// remoteTags are the tags the remote has, by name.
func remoteTags(dir, remote string) (map[string]bool, error) {
	out, err := git(dir, "ls-remote", "--tags", "--refs", remote)
	if err != nil {
		return nil, err
	}
	tags := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		if _, ref, ok := strings.Cut(l, "\t"); ok {
			tags[strings.TrimPrefix(ref, "refs/tags/")] = true
		}
	}
	return tags, nil
}
