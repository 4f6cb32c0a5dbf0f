package client

import "testing"

func TestLastLines(t *testing.T) {
	for _, tc := range []struct {
		in    string
		n     int
		whole bool
		want  string
		ok    bool
	}{
		{"a\nb\nc\n", 2, true, "b\nc\n", true},
		{"a\nb\nc\n", 3, true, "a\nb\nc\n", true},
		{"a\nb\nc\n", 9, true, "a\nb\nc\n", true},
		{"a\nb\nc", 1, true, "c", true},
		{"a\nb\nc", 2, true, "b\nc", true},
		{"", 1, true, "", true},
		{"\n\n", 1, true, "\n", true},
		{"ut\nb\nc\n", 2, false, "b\nc\n", true},
		{"ut\nb\nc\n", 3, false, "b\nc\n", false}, // "ut" may be the end of a longer line
		{"no newline at all", 1, false, "", false},
	} {
		got, ok := lastLines([]byte(tc.in), tc.n, tc.whole)
		if string(got) != tc.want || ok != tc.ok {
			t.Errorf("lastLines(%q, %d, whole %v) = %q, %v; want %q, %v", tc.in, tc.n, tc.whole, got, ok, tc.want, tc.ok)
		}
	}
}
