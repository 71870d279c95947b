package editdist

import "testing"

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "", 3},
		{"status", "status", 0},
		{"stauts", "status", 2},
		{"port", "queuePort", 6},
		{"kitten", "sitting", 3},
		{"Status", "status", 1},
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := Distance(c.b, c.a); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (it is symmetric)", c.b, c.a, got, c.want)
		}
	}
}
