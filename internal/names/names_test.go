package names

import "testing"

func TestValid(t *testing.T) {
	for n, want := range map[string]bool{
		"a": true, "contoso": true, "eus-a-n0000": true, "A.b_c-9": true, "0": true,
		"": false, "a/b": false, "-a": false, ".a": false, "a b": false, "a\x00": false, "é": false,
		"a..b": true, "..": false, string(make([]byte, 64)): false,
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa":  true,  // 63
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa": false, // 64
	} {
		if got := Valid(n); got != want {
			t.Errorf("Valid(%q) = %v, want %v", n, got, want)
		}
		if (Check(n) == nil) != want {
			t.Errorf("Check(%q) disagrees with Valid", n)
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range []string{"a", "a/b", "-", "x.y_z", "ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !Valid(s) {
			return
		}
		for _, c := range []byte(s) {
			if c == '/' || c == ' ' || c >= 0x80 {
				t.Fatalf("Valid(%q) with %q", s, c)
			}
		}
		if len(s) > MaxLen {
			t.Fatalf("Valid(%q): too long", s)
		}
	})
}
