package api

// SpotPrice is the current spot price of one GPU model in one region
// (GET /v1/spot-prices). Spot work whose max_price is below MinMaxPrice
// is not placed there, and running spot work is evicted, with notice, once
// the price rises above its max_price.
type SpotPrice struct {
	Model  string `json:"model"`
	Region string `json:"region"`
	// USDPerGPUHour is the price now.
	USDPerGPUHour float64 `json:"usd_per_gpu_hour"`
	// CatalogUSDPerGPUHour is the catalog's spot price, the market's floor.
	CatalogUSDPerGPUHour float64 `json:"catalog_usd_per_gpu_hour"`
	// Utilization is the share of the market's GPUs in use (0..1).
	Utilization float64 `json:"utilization"`
	// Source is "market" (catalog price moved by utilization) or "policy"
	// (a set_spot_price action in force set it).
	Source string `json:"source"`
	// MinMaxPrice is the lowest max_price new spot work needs to be placed
	// here: the price over 0.8 for a market price (the headroom keeps work
	// from flapping), the price itself for one a policy set.
	MinMaxPrice float64 `json:"min_max_price"`
}
