package azure

import (
	"strings"
	"testing"
)

// A connection string is outside input: whatever it holds, expanding it
// must not panic; a string without the emulator shortcut goes to the SDK
// untouched; and an expanded one names the development account on the
// queue port, and nothing of the input but the proxy's scheme and host.
func FuzzExpandConnectionString(f *testing.F) {
	for _, s := range []string{
		"UseDevelopmentStorage=true",
		"UseDevelopmentStorage=true;DevelopmentStorageProxyUri=http://ipv4.fiddler",
		"UseDevelopmentStorage=true;DevelopmentStorageProxyUri=https://[::1]:8888/p?q#f",
		"UseDevelopmentStorage=true;AccountName=x",
		"usedevelopmentstorage = TRUE ;;",
		"DefaultEndpointsProtocol=https;AccountName=a;AccountKey=a2V5;EndpointSuffix=core.windows.net",
		"UseDevelopmentStorage",
		";=;",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := expandConnectionString(in)
		if err != nil {
			return
		}
		if out == in {
			return
		}
		if !strings.HasPrefix(out, "DefaultEndpointsProtocol=http") ||
			!strings.Contains(out, ";AccountName=devstoreaccount1;") ||
			!strings.Contains(out, ":10001/devstoreaccount1;") ||
			strings.Count(out, ";") != 4 {
			t.Fatalf("%q expanded to %q", in, out)
		}
		if !strings.Contains(strings.ToLower(in), "usedevelopmentstorage") {
			t.Fatalf("%q, without the shortcut, changed to %q", in, out)
		}
	})
}
