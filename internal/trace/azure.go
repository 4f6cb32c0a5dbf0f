package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Tokens is a number of LLM tokens.
type Tokens int32

// MaxTokens bounds a token count read from a trace: far above any model's
// context window, low enough that sums over millions of requests fit in
// int64 and float64 without loss.
const MaxTokens Tokens = 1 << 24

// TokenSizes is the size of one LLM inference request.
type TokenSizes struct {
	Context   Tokens // prompt tokens (prefill)
	Generated Tokens // output tokens (decode)
}

// AzureRequest is one row of an Azure LLM inference trace
// (AzureLLMInferenceTrace_{code,conv}.csv, Patel et al., Splitwise, ISCA '24).
type AzureRequest struct {
	// Time is the arrival time. The trace writes local wall-clock times
	// without a zone ("2023-11-16 18:17:03.9799600", 100 ns precision);
	// they are read as UTC.
	Time time.Time
	TokenSizes
}

// Column names of the Azure LLM inference traces.
const (
	azureColTime      = "TIMESTAMP"
	azureColContext   = "ContextTokens"
	azureColGenerated = "GeneratedTokens"
)

// azureTimeLayout parses "2023-11-16 18:17:03.9799600"; time.Parse accepts
// the fractional seconds after the seconds field, with any number of digits.
const azureTimeLayout = "2006-01-02 15:04:05"

// ReadAzureFile reads an Azure LLM inference trace from a file. Errors name
// the file by its base name.
func ReadAzureFile(path string) ([]AzureRequest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAzure(f, filepath.Base(path))
}

// ReadAzure reads an Azure LLM inference trace: a header naming the columns
// TIMESTAMP, ContextTokens and GeneratedTokens (in any order; other columns
// are ignored), then one request per row. file names the input in errors.
//
// A bad row yields a *ParseError naming the file, the line and the column,
// wrapping ErrBadValue (or ErrEmpty, ErrMissingColumn for the header). Rows
// are returned in file order; the published traces are sorted by time, but
// the reader does not require it.
func ReadAzure(r io.Reader, file string) ([]AzureRequest, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	cr.FieldsPerRecord = 0 // every row as wide as the header
	hdr, err := cr.Read()
	if err == io.EOF {
		return nil, &ParseError{File: file, Line: 1, Err: ErrEmpty}
	}
	if err != nil {
		return nil, azureCSVError(file, err)
	}
	iTime, iCtx, iGen := -1, -1, -1
	for i, h := range hdr {
		h = strings.TrimSpace(h)
		if i == 0 {
			h = strings.TrimPrefix(h, "\ufeff")
		}
		switch {
		case h == azureColTime && iTime < 0:
			iTime = i
		case h == azureColContext && iCtx < 0:
			iCtx = i
		case h == azureColGenerated && iGen < 0:
			iGen = i
		}
	}
	for _, c := range []struct {
		name string
		i    int
	}{{azureColTime, iTime}, {azureColContext, iCtx}, {azureColGenerated, iGen}} {
		if c.i < 0 {
			return nil, &ParseError{File: file, Line: 1, Column: c.name, Err: ErrMissingColumn}
		}
	}
	var out []AzureRequest
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, azureCSVError(file, err)
		}
		bad := func(i int, col, format string, args ...any) error {
			line, colNo := cr.FieldPos(i)
			return &ParseError{File: file, Line: line, Column: col,
				Err: fmt.Errorf("%w: %s (byte column %d)", ErrBadValue, fmt.Sprintf(format, args...), colNo)}
		}
		var q AzureRequest
		ts := strings.TrimSpace(rec[iTime])
		if q.Time, err = time.Parse(azureTimeLayout, ts); err != nil {
			return nil, bad(iTime, azureColTime, "%q is not a time like 2023-11-16 18:17:03.9799600", ts)
		}
		if q.Context, err = parseTokens(rec[iCtx]); err != nil {
			return nil, bad(iCtx, azureColContext, "%v", err)
		}
		if q.Generated, err = parseTokens(rec[iGen]); err != nil {
			return nil, bad(iGen, azureColGenerated, "%v", err)
		}
		out = append(out, q)
	}
}

func parseTokens(s string) (Tokens, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty cell")
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a token count", s)
	}
	if v < 0 || v > int64(MaxTokens) {
		return 0, fmt.Errorf("token count %d out of range [0, %d]", v, MaxTokens)
	}
	return Tokens(v), nil
}

func azureCSVError(file string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &ParseError{File: file, Line: pe.Line,
			Err: fmt.Errorf("%w: %v (byte column %d)", ErrBadValue, pe.Err, pe.Column)}
	}
	return &ParseError{File: file, Err: err}
}

// TokenDist is the empirical distribution of request sizes of a trace: each
// observed (context, generated) pair has equal weight, so sampling keeps the
// correlation between prompt and output lengths. It is immutable and safe to
// share.
type TokenDist struct {
	sizes []TokenSizes
}

// NewTokenDist builds the distribution of the requests' sizes. It fails with
// ErrEmpty when there is no request.
func NewTokenDist(reqs []AzureRequest) (*TokenDist, error) {
	if len(reqs) == 0 {
		return nil, fmt.Errorf("%w: no request to build a size distribution from", ErrEmpty)
	}
	s := make([]TokenSizes, len(reqs))
	for i, q := range reqs {
		s[i] = q.TokenSizes
	}
	return &TokenDist{sizes: s}, nil
}

// Len is the number of observations.
func (d *TokenDist) Len() int { return len(d.sizes) }

// Sizes returns a copy of the observations, in trace order.
func (d *TokenDist) Sizes() []TokenSizes { return append([]TokenSizes(nil), d.sizes...) }

// Sample draws one request size (an observation chosen uniformly) from r.
func (d *TokenDist) Sample(r *rand.Rand) TokenSizes { return d.sizes[r.IntN(len(d.sizes))] }

// Mean returns the mean context and generated token counts.
func (d *TokenDist) Mean() (context, generated float64) {
	var c, g int64
	for _, s := range d.sizes {
		c += int64(s.Context)
		g += int64(s.Generated)
	}
	n := float64(len(d.sizes))
	return float64(c) / n, float64(g) / n
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1, nearest rank) of the context
// and of the generated token counts, each taken on its own.
func (d *TokenDist) Quantile(q float64) (context, generated Tokens) {
	n := len(d.sizes)
	c := make([]Tokens, n)
	g := make([]Tokens, n)
	for i, s := range d.sizes {
		c[i], g[i] = s.Context, s.Generated
	}
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	sort.Slice(g, func(i, j int) bool { return g[i] < g[j] })
	k := int(math.Ceil(q*float64(n))) - 1
	k = max(0, min(n-1, k))
	return c[k], g[k]
}
