package config

import (
	"fmt"
	"reflect"
)

// Limits bound what the server holds for tenants and what one request
// may carry; they are read from the `limits:` section of the config file
// that `arbiter serve --config` loads (at every start: they are not
// seeded into the store). A zero or absent value takes the default
// (DefaultLimits). Counts are refused with 409 LimitExceeded, field sizes
// with 400 InvalidArgument, both naming the limit.
type Limits struct {
	// WorkloadsQueued bounds a tenant's live (Pending or Running)
	// workloads; QueuedBytes their stored size together (what the server
	// keeps decoded in memory for the scheduler).
	WorkloadsQueued int `yaml:"workloads_queued" json:"workloads_queued"`
	QueuedBytes     int `yaml:"queued_bytes" json:"queued_bytes"`
	// Reservations bounds a tenant's reservations.
	Reservations int `yaml:"reservations" json:"reservations"`
	// Policies bounds the applied policies (the admin's, all together).
	Policies int `yaml:"policies" json:"policies"`
	// Labels bounds the labels of a workload or a node; LabelKeyBytes and
	// LabelValueBytes the length of each key and value.
	Labels          int `yaml:"labels" json:"labels"`
	LabelKeyBytes   int `yaml:"label_key_bytes" json:"label_key_bytes"`
	LabelValueBytes int `yaml:"label_value_bytes" json:"label_value_bytes"`
	// EnvVars and EnvBytes bound command.env: its entries and the bytes of
	// its keys and values together.
	EnvVars  int `yaml:"env_vars" json:"env_vars"`
	EnvBytes int `yaml:"env_bytes" json:"env_bytes"`
	// Args and ArgvBytes bound command.argv: its entries and their bytes.
	Args      int `yaml:"args" json:"args"`
	ArgvBytes int `yaml:"argv_bytes" json:"argv_bytes"`
	// DirBytes bounds command.dir.
	DirBytes int `yaml:"dir_bytes" json:"dir_bytes"`
	// PolicyBytes bounds a policy's source; AlertBytes the alert rules'.
	PolicyBytes int `yaml:"policy_bytes" json:"policy_bytes"`
	// PageSize is a list page's length when the request has no ?limit;
	// MaxPageSize the largest ?limit; PageBytes ends a page early once its
	// items' JSON reach this size (a page has at least one item).
	PageSize    int `yaml:"page_size" json:"page_size"`
	MaxPageSize int `yaml:"max_page_size" json:"max_page_size"`
	PageBytes   int `yaml:"page_bytes" json:"page_bytes"`
	// Tenants overrides the per-tenant counts for some tenants.
	Tenants map[string]TenantLimits `yaml:"tenants" json:"tenants,omitempty"`
}

// TenantLimits are one tenant's own counts (zero: the server-wide value).
type TenantLimits struct {
	WorkloadsQueued int `yaml:"workloads_queued" json:"workloads_queued"`
	QueuedBytes     int `yaml:"queued_bytes" json:"queued_bytes"`
	Reservations    int `yaml:"reservations" json:"reservations"`
}

// DefaultLimits are the limits where the config sets none. A tenant at
// its limits holds at most QueuedBytes of live workloads (docs/server.md
// has the server's heap measured so).
var DefaultLimits = Limits{
	WorkloadsQueued: 10_000,
	QueuedBytes:     64 << 20,
	Reservations:    100,
	Policies:        200,
	Labels:          64,
	LabelKeyBytes:   63,
	LabelValueBytes: 253,
	EnvVars:         256,
	EnvBytes:        64 << 10,
	Args:            1024,
	ArgvBytes:       64 << 10,
	DirBytes:        4096,
	PolicyBytes:     256 << 10,
	PageSize:        500,
	MaxPageSize:     1000,
	PageBytes:       4 << 20,
}

// WithDefaults returns l with every zero count or size taken from
// DefaultLimits.
func (l Limits) WithDefaults() Limits {
	v, d := reflect.ValueOf(&l).Elem(), reflect.ValueOf(DefaultLimits)
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Int && f.Int() == 0 {
			f.SetInt(d.Field(i).Int())
		}
	}
	if l.PageSize > l.MaxPageSize {
		l.PageSize = l.MaxPageSize
	}
	return l
}

// Validate returns the first problem, naming its field (limits.NAME).
func (l Limits) Validate() error {
	v, t := reflect.ValueOf(l), reflect.TypeOf(l)
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Int && (f.Int() < 0 || f.Int() > 1<<40) {
			return fmt.Errorf("limits.%s: must be between 0 (the default) and %d, got %d", t.Field(i).Tag.Get("yaml"), int64(1<<40), f.Int())
		}
	}
	for name, tl := range l.Tenants {
		if tl.WorkloadsQueued < 0 || tl.Reservations < 0 || tl.QueuedBytes < 0 || tl.WorkloadsQueued > 1<<40 || tl.Reservations > 1<<40 || tl.QueuedBytes > 1<<40 {
			return fmt.Errorf("limits.tenants.%s: counts must be between 0 (the server-wide value) and %d", name, int64(1<<40))
		}
	}
	return nil
}
