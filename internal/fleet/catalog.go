package fleet

import (
	_ "embed"
	"fmt"
	"sort"

	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// ModelID names a GPU model: "A100-80G", "H100-80G", ...
type ModelID string

// SKUName names a machine size as the cloud names it.
type SKUName string

// Model is a GPU model.
type Model struct {
	Pos        yamlfile.Pos
	Name       ModelID `yaml:"name"`
	MemoryGiB  int     `yaml:"memory_gib"`
	TrainSpeed float64 `yaml:"train_speed"` // relative to A100-80G
	InferSpeed float64 `yaml:"infer_speed"` // relative to A100-80G
}

// Price is an hourly price in USD for one machine.
type Price struct {
	OnDemand   float64 `yaml:"on_demand"`
	Spot       float64 `yaml:"spot"`
	Reserved1Y float64 `yaml:"reserved_1y"`
	Reserved3Y float64 `yaml:"reserved_3y"`
}

// SKU is a machine size.
type SKU struct {
	Pos            yamlfile.Pos
	Name           SKUName          `yaml:"name"`
	Model          ModelID          `yaml:"model"`
	GPUs           int              `yaml:"gpus"`
	VCPUs          int              `yaml:"vcpus"`
	MemoryGiB      int              `yaml:"memory_gib"`
	NVLink         bool             `yaml:"nvlink"`
	InfiniBandGbps int              `yaml:"infiniband_gbps"`
	QuotaFamily    string           `yaml:"quota_family"`
	Prices         map[string]Price `yaml:"prices"`
}

// Catalog holds the known GPU models and SKUs.
type Catalog struct {
	Models            []Model            `yaml:"models"`
	SKUs              []SKU              `yaml:"skus"`
	RegionPriceFactor map[string]float64 `yaml:"region_price_factor"`

	models map[ModelID]*Model
	skus   map[SKUName]*SKU
}

//go:embed catalog.yaml
var builtinCatalog []byte

// Builtin returns a fresh copy of the built-in catalog.
func Builtin() *Catalog {
	var c Catalog
	if err := yamlfile.Decode("builtin catalog.yaml", builtinCatalog, &c); err != nil {
		panic(err) // the embedded file is tested
	}
	if err := c.index(); err != nil {
		panic(err)
	}
	return &c
}

// Merge overrides or adds models, SKUs and price factors from o. An SKU in o
// replaces the built-in one of the same name whole.
func (c *Catalog) Merge(o *Catalog) error {
	for _, m := range o.Models {
		if old, ok := c.models[m.Name]; ok {
			*old = m
		} else {
			c.Models = append(c.Models, m)
		}
		c.reindexModels()
	}
	for _, s := range o.SKUs {
		if old, ok := c.skus[s.Name]; ok {
			*old = s
		} else {
			c.SKUs = append(c.SKUs, s)
		}
		c.reindexSKUs()
	}
	if c.RegionPriceFactor == nil {
		c.RegionPriceFactor = map[string]float64{}
	}
	for r, f := range o.RegionPriceFactor {
		c.RegionPriceFactor[r] = f
	}
	return c.index()
}

func (c *Catalog) reindexModels() {
	c.models = make(map[ModelID]*Model, len(c.Models))
	for i := range c.Models {
		c.models[c.Models[i].Name] = &c.Models[i]
	}
}

func (c *Catalog) reindexSKUs() {
	c.skus = make(map[SKUName]*SKU, len(c.SKUs))
	for i := range c.SKUs {
		c.skus[c.SKUs[i].Name] = &c.SKUs[i]
	}
}

func (c *Catalog) index() error {
	var errs yamlfile.Errors
	c.reindexModels()
	c.reindexSKUs()
	seen := map[ModelID]bool{}
	for i, m := range c.Models {
		f := fmt.Sprintf("catalog.models[%d]", i)
		if m.Name == "" {
			errs.Add(m.Pos, f+".name", "a GPU model needs a name")
		}
		if seen[m.Name] {
			errs.Add(m.Pos, f+".name", "GPU model %q defined twice", m.Name)
		}
		seen[m.Name] = true
		if m.TrainSpeed < 0 || m.InferSpeed < 0 || m.MemoryGiB < 0 {
			errs.Add(m.Pos, f, "speeds and memory must not be negative")
		}
	}
	seenSKU := map[SKUName]bool{}
	for i, s := range c.SKUs {
		f := fmt.Sprintf("catalog.skus[%d]", i)
		if s.Name == "" {
			errs.Add(s.Pos, f+".name", "an SKU needs a name")
		}
		if seenSKU[s.Name] {
			errs.Add(s.Pos, f+".name", "SKU %q defined twice", s.Name)
		}
		seenSKU[s.Name] = true
		if _, ok := c.models[s.Model]; !ok {
			errs.Add(s.Pos, f+".model", "unknown GPU model %q (known: %v)", s.Model, c.ModelNames())
		}
		if s.GPUs < 1 || s.GPUs > 64 {
			errs.Add(s.Pos, f+".gpus", "an SKU has 1 to 64 GPUs, got %d", s.GPUs)
		}
		if s.VCPUs < 0 || s.MemoryGiB < 0 {
			errs.Add(s.Pos, f, "vcpus and memory_gib must not be negative")
		}
	}
	return errs.Err()
}

// Model returns the GPU model named id.
func (c *Catalog) Model(id ModelID) (*Model, bool) { m, ok := c.models[id]; return m, ok }

// SKU returns the SKU named n.
func (c *Catalog) SKU(n SKUName) (*SKU, bool) { s, ok := c.skus[n]; return s, ok }

// ModelNames returns the known model names, sorted.
func (c *Catalog) ModelNames() []ModelID {
	out := make([]ModelID, 0, len(c.models))
	for id := range c.models {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// PriceIn returns the hourly price of one machine of s in region. A region
// the SKU does not list takes the eastus price times the region's factor
// (1 when unknown); missing reserved prices default to 62% and 38% of the
// on-demand price.
func (c *Catalog) PriceIn(s *SKU, region string) Price {
	p, ok := s.Prices[region]
	if !ok {
		base := s.Prices["eastus"]
		f := 1.0
		if v, ok := c.RegionPriceFactor[region]; ok && v > 0 {
			f = v
		}
		p = Price{OnDemand: base.OnDemand * f, Spot: base.Spot * f, Reserved1Y: base.Reserved1Y * f, Reserved3Y: base.Reserved3Y * f}
	}
	if p.Reserved1Y == 0 {
		p.Reserved1Y = p.OnDemand * 0.62
	}
	if p.Reserved3Y == 0 {
		p.Reserved3Y = p.OnDemand * 0.38
	}
	return p
}
