package trace

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const azureCodeTrace = "../../../shared/traces/azure-llm-inference-2023/AzureLLMInferenceTrace_code.csv"

func TestReadAzure(t *testing.T) {
	in := "TIMESTAMP,ContextTokens,GeneratedTokens\n" +
		"2023-11-16 18:17:03.9799600,4808,10\n" +
		"2023-11-16 18:17:04.0319600,3180,8"
	got, err := ReadAzure(strings.NewReader(in), "x.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := []AzureRequest{
		{Time: time.Date(2023, 11, 16, 18, 17, 3, 979960000, time.UTC), TokenSizes: TokenSizes{4808, 10}},
		{Time: time.Date(2023, 11, 16, 18, 17, 4, 31960000, time.UTC), TokenSizes: TokenSizes{3180, 8}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if !got[i].Time.Equal(want[i].Time) || got[i].TokenSizes != want[i].TokenSizes {
			t.Errorf("row %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestReadAzureColumnOrder(t *testing.T) {
	in := "\ufeffGeneratedTokens, TIMESTAMP ,ContextTokens,extra\n7,2023-11-16 18:17:03,100,x\n"
	got, err := ReadAzure(strings.NewReader(in), "x.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Context != 100 || got[0].Generated != 7 || got[0].Time.Second() != 3 {
		t.Fatalf("got %+v", got)
	}
}

func TestReadAzureErrors(t *testing.T) {
	const hdr = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
	const ok = "2023-11-16 18:17:03.9799600,4808,10\n"
	tests := []struct {
		name     string
		in       string
		sentinel error
		line     int
		column   string
		msg      string // substring of Error()
	}{
		{"empty", "", ErrEmpty, 1, "", "t.csv:1: empty file"},
		{"missing column", "TIMESTAMP,ContextTokens\n", ErrMissingColumn, 1, "GeneratedTokens", "column GeneratedTokens"},
		{"bad time", hdr + ok + "yesterday,1,2\n", ErrBadValue, 3, "TIMESTAMP", `t.csv:3: column TIMESTAMP: bad value: "yesterday" is not a time`},
		{"bad context", hdr + ok + "2023-11-16 18:17:04,abc,2\n", ErrBadValue, 3, "ContextTokens", "(byte column 21)"},
		{"negative generated", hdr + "2023-11-16 18:17:04,1,-2\n", ErrBadValue, 2, "GeneratedTokens", "out of range"},
		{"huge context", hdr + "2023-11-16 18:17:04,99999999999,2\n", ErrBadValue, 2, "ContextTokens", "out of range"},
		{"empty cell", hdr + "2023-11-16 18:17:04,,2\n", ErrBadValue, 2, "ContextTokens", "empty cell"},
		{"short row", hdr + ok + "2023-11-16 18:17:04,1\n", ErrBadValue, 3, "", "wrong number of fields"},
		{"bad quote", hdr + "\"2023-11-16 18:17:04,1,2\n", ErrBadValue, 2, "", "t.csv:2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadAzure(strings.NewReader(tc.in), "t.csv")
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, tc.sentinel) {
				t.Errorf("error %v is not %v", err, tc.sentinel)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not a *ParseError", err)
			}
			if pe.File != "t.csv" || pe.Line != tc.line || pe.Column != tc.column {
				t.Errorf("at %s:%d column %q, want t.csv:%d column %q", pe.File, pe.Line, pe.Column, tc.line, tc.column)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("message %q does not contain %q", err.Error(), tc.msg)
			}
		})
	}
}

func readCodeTrace(t testing.TB) []AzureRequest {
	t.Helper()
	if _, err := os.Stat(azureCodeTrace); err != nil {
		t.Skipf("code trace not available: %v", err)
	}
	reqs, err := ReadAzureFile(azureCodeTrace)
	if err != nil {
		t.Fatal(err)
	}
	return reqs
}

// TestAzureCodeTrace checks the reader against facts of the published code
// trace (its README and an independent awk pass over the file).
func TestAzureCodeTrace(t *testing.T) {
	reqs := readCodeTrace(t)
	if len(reqs) != 8819 {
		t.Fatalf("got %d requests, want 8819", len(reqs))
	}
	first, last := reqs[0], reqs[len(reqs)-1]
	if want := time.Date(2023, 11, 16, 18, 17, 3, 979960000, time.UTC); !first.Time.Equal(want) || first.TokenSizes != (TokenSizes{4808, 10}) {
		t.Errorf("first row %+v", first)
	}
	if last.TokenSizes != (TokenSizes{549, 173}) || last.Time.Hour() != 19 || last.Time.Minute() != 14 {
		t.Errorf("last row %+v", last)
	}
	for i := 1; i < len(reqs); i++ {
		if reqs[i].Time.Before(reqs[i-1].Time) {
			t.Fatalf("row %d out of time order", i+2)
		}
	}
	d, err := NewTokenDist(reqs)
	if err != nil {
		t.Fatal(err)
	}
	c, g := d.Mean()
	if c < 2047.8 || c > 2047.9 || g < 27.88 || g > 27.89 {
		t.Errorf("means %.3f context, %.3f generated; want 2047.85, 27.88", c, g)
	}
	qc, qg := d.Quantile(0.5)
	if qc != 1469 || qg != 13 {
		t.Errorf("medians %d/%d, want 1469/13 (trace README)", qc, qg)
	}
	qc, qg = d.Quantile(1)
	if qc != 7437 || qg != 1899 {
		t.Errorf("maxima %d/%d, want 7437/1899", qc, qg)
	}
}

// TestTokenDistSample checks that sampling is deterministic for a seed and
// reproduces the trace's mean within sampling error.
func TestTokenDistSample(t *testing.T) {
	reqs := readCodeTrace(t)
	d, err := NewTokenDist(reqs)
	if err != nil {
		t.Fatal(err)
	}
	const seed = 42
	draw := func() []TokenSizes {
		r := rand.New(rand.NewPCG(seed, 0))
		out := make([]TokenSizes, 200_000)
		for i := range out {
			out[i] = d.Sample(r)
		}
		return out
	}
	a, b := draw(), draw()
	var sumC float64
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed %d: draw %d differs between runs", seed, i)
		}
		sumC += float64(a[i].Context)
	}
	mc, _ := d.Mean()
	// Context stdev ≈ 1,900 tokens: the standard error of the mean of 200,000
	// draws is ≈ 4.3 tokens; allow 5 standard errors.
	if got := sumC / float64(len(a)); got < mc-22 || got > mc+22 {
		t.Errorf("seed %d: sample mean context %.1f, trace mean %.1f", seed, got, mc)
	}
}

func TestNewTokenDistEmpty(t *testing.T) {
	if _, err := NewTokenDist(nil); !errors.Is(err, ErrEmpty) {
		t.Fatalf("got %v, want ErrEmpty", err)
	}
}

func TestReadAzureFileMissing(t *testing.T) {
	if _, err := ReadAzureFile(filepath.Join(t.TempDir(), "none.csv")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v, want ErrNotExist", err)
	}
}

func BenchmarkReadAzureCode(b *testing.B) {
	data, err := os.ReadFile(azureCodeTrace)
	if err != nil {
		b.Skip(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		reqs, err := ReadAzure(strings.NewReader(string(data)), "code.csv")
		if err != nil || len(reqs) != 8819 {
			b.Fatal(err, len(reqs))
		}
	}
}
