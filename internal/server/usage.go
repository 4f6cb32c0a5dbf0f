package server

import (
	"net/http"
)

// Usage handlers: quota usage per tenant (computed in quota.go).

func (s *Server) tenantUsage(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("tenant") // the router checked it is the caller's (tenantScoped)
	wd, err := s.readWorld(r, true)
	if err != nil {
		return err
	}
	if _, ok := wd.Tree.Lookup(name); !ok {
		return notFound("tenant", name)
	}
	return writeSlice(s, w, r, usage(wd, []string{name}, r.URL.Query().Get("region"), s.now()))
}

func (s *Server) allUsage(w http.ResponseWriter, r *http.Request) error {
	wd, err := s.readWorld(r, true)
	if err != nil {
		return err
	}
	p := who(r)
	var names []string
	if want := r.URL.Query().Get("tenant"); want != "" {
		if !p.admin && want != p.tenant {
			return notFound("tenant", want)
		}
		names = []string{want}
	} else if p.admin {
		for _, t := range wd.Tree.Tenants {
			names = append(names, t.Name)
		}
	} else {
		names = []string{p.tenant}
	}
	return writeSlice(s, w, r, usage(wd, names, r.URL.Query().Get("region"), s.now()))
}
