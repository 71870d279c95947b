package queuemeta

import "testing"

func TestEqual(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b map[string]string
		want bool
	}{
		{"nil and empty", nil, map[string]string{}, true},
		{"same", map[string]string{"k": "v"}, map[string]string{"k": "v"}, true},
		{"names ignore case", map[string]string{"Color": "red"}, map[string]string{"cOLOR": "red"}, true},
		{"values keep case", map[string]string{"color": "red"}, map[string]string{"color": "Red"}, false},
		{"other name", map[string]string{"a": "1"}, map[string]string{"b": "1"}, false},
		{"one more", map[string]string{"a": "1"}, map[string]string{"a": "1", "b": "2"}, false},
		{"one fewer", map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1"}, false},
		{"empty value", map[string]string{"a": ""}, map[string]string{"A": ""}, true},
	} {
		if got := Equal(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: Equal(%v, %v) = %v, want %v", tc.name, tc.a, tc.b, got, tc.want)
		}
		if got := Equal(tc.b, tc.a); got != tc.want {
			t.Errorf("%s: Equal(%v, %v) = %v, want %v", tc.name, tc.b, tc.a, got, tc.want)
		}
	}
}
