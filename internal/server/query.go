package server

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/arbiterhq/arbiter/internal/api"
)

// Query parameters are parsed strictly: a parameter the route does not
// take, one given twice, or a value that is not exactly of its type
// ("12abc", " 12", "+12", "1e3" for a number) is refused with 400 naming
// the parameter. The parameters a route takes are those of its doc in the
// route table (routes.go), so the document and the server cannot disagree.

// checkQuery refuses parameters the route does not take, and repeated
// ones.
func checkQuery(rt apiRoute, q url.Values) error {
	d := rt.doc
	for name, vs := range q {
		known := false
		for _, k := range d.query {
			known = known || k == name
		}
		if !known {
			return apiErr(http.StatusBadRequest, api.CodeInvalid, name, "unknown query parameter %q (%s takes %v)", name, rt.pattern, d.query)
		}
		if len(vs) > 1 {
			return apiErr(http.StatusBadRequest, api.CodeInvalid, name, "query parameter %q is given %d times", name, len(vs))
		}
	}
	return nil
}

// intParam parses query parameter name as a decimal integer in [lo, hi]:
// digits only, with a '-' only where lo is negative.
func intParam(q url.Values, name string, lo, hi int64) (int64, error) {
	v := q.Get(name)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || v == "" || v[0] == '+' || (v[0] == '-' && lo >= 0) || n < lo || n > hi {
		return 0, apiErr(http.StatusBadRequest, api.CodeInvalid, name, "%s must be an integer between %d and %d, got %q", name, lo, hi, v)
	}
	return n, nil
}

// optIntParam is intParam with def when the parameter is absent.
func optIntParam(q url.Values, name string, lo, hi, def int64) (int64, error) {
	if _, ok := q[name]; !ok {
		return def, nil
	}
	return intParam(q, name, lo, hi)
}

// boolParam parses query parameter name as true or false (absent: false).
func boolParam(q url.Values, name string) (bool, error) {
	vs, ok := q[name]
	if !ok {
		return false, nil
	}
	switch vs[0] {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, apiErr(http.StatusBadRequest, api.CodeInvalid, name, "%s must be true or false, got %q", name, clip(vs[0], 64))
}
