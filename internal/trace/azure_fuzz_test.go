package trace

import (
	"errors"
	"strings"
	"testing"
)

// FuzzReadAzure checks that the reader never panics, that every failure is a
// *ParseError naming the file, and that accepted rows hold valid values.
func FuzzReadAzure(f *testing.F) {
	f.Add("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n")
	f.Add("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,1,2\n2023-11-16 18:17:04,x,2\n")
	f.Add("ContextTokens,TIMESTAMP,GeneratedTokens\n5,2023-11-16 18:17:03,0")
	f.Add("TIMESTAMP,ContextTokens\n")
	f.Add("\"")
	f.Fuzz(func(t *testing.T, in string) {
		reqs, err := ReadAzure(strings.NewReader(in), "f.csv")
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.File != "f.csv" {
				t.Fatalf("error %v (%T) is not a *ParseError for f.csv", err, err)
			}
			return
		}
		for i, q := range reqs {
			if q.Context < 0 || q.Context > MaxTokens || q.Generated < 0 || q.Generated > MaxTokens {
				t.Fatalf("row %d: bad sizes %+v", i, q.TokenSizes)
			}
		}
	})
}
